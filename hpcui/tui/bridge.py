"""Ask the user from a worker thread: the core's SSH callbacks run off the UI thread.

paramiko calls ``prompt`` (2FA) and ``on_unknown_host`` while it connects, inside a
thread worker. The worker cannot await a modal, so it schedules the modal on the UI
thread (``call_from_thread``) and blocks on a ``threading.Event`` that the modal's
dismiss callback sets. If the app exits first, the worker gets ``default`` back instead
of waiting forever.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

T = TypeVar("T")


def ask_from_thread(app: App[Any], make_screen: Callable[[], Screen[Any]], default: T) -> T:
    """Push ``make_screen()`` on the UI thread and block this thread until it is dismissed."""
    done = threading.Event()
    box: list[T] = []

    def answered(result: T | None) -> None:
        box.append(default if result is None else result)
        done.set()

    def show() -> None:
        app.push_screen(make_screen(), callback=answered)

    app.call_from_thread(show)
    while not done.wait(0.2):
        if not app.is_running:
            return default
    return box[0]


class AppPrompt:
    """The core's keyboard-interactive callback ``(title, instructions, [(q, echo)])``,
    answered in the app's dialog; `cancelled` says whether the user closed the last one
    (the hub tells a cancelled dialog from a wrong code)."""

    def __init__(self, app: App[Any], cluster: str) -> None:
        self.app = app
        self.cluster = cluster
        self.cancelled = False

    def __call__(
        self, title: str, instructions: str, questions: list[tuple[str, bool]]
    ) -> list[str]:
        from hpcui.tui.modals import PromptModal

        if not questions:  # servers may send an empty round; answer it without a dialog
            return []
        none: list[str] | None = None  # the answer of a dialog closed without one
        answers = ask_from_thread(
            self.app, lambda: PromptModal(self.cluster, title, instructions, list(questions)), none
        )
        self.cancelled = answers is None
        return ["" for _ in questions] if answers is None else answers  # empty: refused


def prompt_bridge(app: App[Any], cluster: str) -> AppPrompt:
    return AppPrompt(app, cluster)


def host_key_bridge(app: App[Any], cluster: str) -> Callable[[str, str, str], bool]:
    """The core's unknown-host callback: True accepts (the core writes known_hosts)."""
    from hpcui.tui.modals import HostKeyModal

    def confirm(host: str, key_type: str, fingerprint: str) -> bool:
        return ask_from_thread(
            app, lambda: HostKeyModal(cluster, host, key_type, fingerprint), False
        )

    return confirm
