"""What screens ask of the app, and what the app tells a screen: Textual messages only.

Screens never import the app and the app never calls into a screen's methods: a screen
posts one of these (they bubble to the app), and the app posts the "show" messages to the
screen of a mode. That keeps the import graph one-way (app -> screens -> messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from hpcui.jobs.control import Verb

JobKey = tuple[str, str]  # (cluster, job id)


# -- screens -> app --------------------------------------------------------------------------


@dataclass
class OpenJob(Message):
    """Show this job on the Job screen."""

    cluster: str
    job_id: str


@dataclass
class CancelJobs(Message):
    """Cancel these jobs (already confirmed by the user)."""

    jobs: list[JobKey]


@dataclass
class ControlJobs(Message):
    """Hold or release these jobs (any job of the user; one scheduler call per cluster)."""

    verb: Verb  # "hold" or "release"
    jobs: list[JobKey]


@dataclass
class StopJobs(Message):
    """Ask these jobs to stop gracefully (their code polls stop_requested())."""

    jobs: list[JobKey]


@dataclass
class Resubmit(Message):
    """Open the Submit form filled as it was for this job."""

    cluster: str
    job_id: str


@dataclass
class Submitted(Message):
    """The Submit screen's job reached the scheduler."""

    cluster: str
    job_id: str


# -- app -> a screen ---------------------------------------------------------------------------


@dataclass
class ShowView(Message):
    """Jobs screen: switch to the ``live`` or ``history`` table."""

    view: str


@dataclass
class ShowJob(Message):
    """Job screen: show this job."""

    cluster: str
    job_id: str


@dataclass
class Prefill(Message):
    """Submit screen: fill the form with these values (a SubmitForm's ``as_dict``)."""

    form: dict[str, Any]
