"""Quota: the site's tool (profile ``quota_command``) or the known tools tried in order.

One round trip: a shell snippet tries each known tool that exists on the login node and
stops at the first that answers (exit 0, some output), reporting every one it tried, so
the client knows which tool spoke and can parse its output with that tool's parser. The
parsers are strict (backends.quota): an answer that cannot be read is an error that
says so, never a wrong number.
"""

from __future__ import annotations

import logging
import shlex

from pydantic import ConfigDict

from hpcui.backends.model import Model
from hpcui.backends.quota import (
    QUOTA_COMMANDS,
    QUOTA_PARSERS,
    QuotaEntry,
    QuotaParseError,
    parse_quota,
)
from hpcui.errors import HpcuiError
from hpcui.sitestate.footprint import OwnUsage
from hpcui.sitestate.remote import Part, first_command, parse_parts
from hpcui.transport.base import Command, Transport

__all__ = [
    "QuotaError",
    "QuotaReport",
    "QuotaTry",
    "candidates",
    "fetch_quota",
    "parse_quota",
    "read_report",
]

log = logging.getLogger(__name__)


class QuotaError(HpcuiError):
    """No quota tool answered, or its answer could not be read."""


class QuotaTry(Model):
    """One tool hpcui tried: exit status (None: not installed) and the start of its output."""

    model_config = ConfigDict(frozen=True)

    tool: str
    exit_status: int | None
    output_head: str = ""


class QuotaReport(Model):
    """The entries and which tool produced them (``tried`` in order, the last one answered)."""

    model_config = ConfigDict(frozen=True)

    tool: str
    entries: list[QuotaEntry]
    tried: list[QuotaTry]
    #: what hpcui's own folders take (SiteView.quota_report adds it)
    own: OwnUsage | None = None

    @property
    def near_limit(self) -> list[QuotaEntry]:
        return [e for e in self.entries if e.near_limit]


def _tool_for(command: str) -> str | None:
    """The parser name a configured command line belongs to (``lfs quota -h /x`` -> ``lfs quota``)."""
    words = shlex.split(command)
    for name in sorted(QUOTA_PARSERS, key=len, reverse=True):
        if words[: len(name.split())] == name.split():
            return name
    return None


def candidates(quota_command: str | None) -> list[tuple[str, str, Command]]:
    """(tool, program, command) to try, in order.

    The profile's tool first (a key of QUOTA_COMMANDS such as ``bsc_quota``, or a
    command line such as ``lfs quota -h /scratch``), then the known tools, so a login
    node without the site tool still shows ``quota``/``df``; the report names the tool.
    """
    known: list[tuple[str, str, Command]] = [(n, argv[0], argv) for n, argv in QUOTA_COMMANDS]
    if not quota_command:
        return known
    if quota_command in dict(QUOTA_COMMANDS):
        first = next(c for c in known if c[0] == quota_command)
    else:
        words = shlex.split(quota_command)
        if not words:
            raise QuotaError("The profile's quota_command is empty. Set it to e.g. 'bsc_quota'.")
        first = (_tool_for(quota_command) or "custom", words[0], quota_command)
    return [first, *(c for c in known if c[0] != first[0])]


def _parse(part: Part) -> list[QuotaEntry]:
    parser = QUOTA_PARSERS.get(part.name, parse_quota)
    return parser(part.output)


def read_report(parts: list[Part], *, cluster: str = "the cluster") -> QuotaReport:
    """Pick the answer among the tried tools' outputs and parse it with its own parser.

    The answering tool is the last one tried (the snippet stops there). A tool that
    answered with nothing hpcui can read is an error, not a silent fallback to df: a
    site tool that prints something new should be noticed, not hidden.
    """
    tried = [
        QuotaTry(tool=p.name, exit_status=p.exit_status, output_head=p.output[:500]) for p in parts
    ]
    answered = [p for p in parts if p.ok and p.output.strip()]
    if answered:
        part = answered[-1]
        try:
            entries = _parse(part)
        except QuotaParseError as exc:
            raise QuotaError(
                f"`{part.name}` on {cluster} answered, but hpcui cannot read its output "
                f"({exc}). Its output began: {part.output[:300]!r}. Set `quota_command` in the "
                "cluster's profile to a tool hpcui knows, and report the format."
            ) from exc
        if part.name == "quota" and not entries:
            # quota(1) with no quota set: say so rather than show an empty table
            log.info("quota(1) on %s reports no limits", cluster)
        return QuotaReport(tool=part.name, entries=entries, tried=tried)
    # Over quota, quota(1) exits 1 but still prints its table: read it if it parses.
    for part in parts:
        if part.exit_status not in (None, 0) and part.output.strip():
            try:
                entries = _parse(part)
            except QuotaParseError:
                continue
            if entries:
                return QuotaReport(tool=part.name, entries=entries, tried=tried)
    summary = (
        ", ".join(
            f"{t.tool} ({'not installed' if t.exit_status is None else f'exit {t.exit_status}'})"
            for t in tried
        )
        or "nothing"
    )
    raise QuotaError(
        f"No quota tool answered on {cluster} (tried {summary}). Set `quota_command` in the "
        "cluster's profile to the site's quota command (e.g. 'bsc_quota', 'lumi-quota', "
        "'lfs quota -h $HOME')."
    )


def fetch_quota(
    transport: Transport, quota_command: str | None = None, *, cluster: str = "the cluster"
) -> QuotaReport:
    """ONE round trip: try the tools, read the first answer."""
    tries = candidates(quota_command)
    res = transport.run(first_command(tries))
    parts = parse_parts(res.stdout, [name for name, _, _ in tries])
    if not parts:
        raise QuotaError(
            f"The quota probe on {cluster} printed nothing hpcui recognises (exit status "
            f"{res.exit_status}: {(res.stderr or res.stdout).strip()[:300]!r}). Check that "
            "`sh -c true` works for you on the login node, then retry."
        )
    return read_report(parts, cluster=cluster)
