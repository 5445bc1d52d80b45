"""A transport that answers commands with canned results, for unit tests of command glue.

Unit tests only: it replays verbatim captured outputs (tests/fixtures) so that the
adapter code around the parsers can be tested without a cluster. Everything that can
run for real is tested against the dev cluster in tests/integration.
"""

from __future__ import annotations

from hpcui.transport.base import Command, CommandResult, Transport
from hpcui.transport.quoting import to_command


def ok(out: str = "", err: str = "", rc: int = 0) -> CommandResult:
    return CommandResult(rc, out.encode(), err.encode())


class CannedTransport(Transport):
    """`answers` as a list: returned in order. As a dict: the first key that stands in the
    command as whole words (`"qstat -x"` matches `qstat -x -t ...`, `"sacct"` never `sacctmgr`).

    Unknown commands exit 127 like a shell would ("not found"), or raise when
    `strict` is set, so a test notices a command it did not expect.
    """

    description = "canned"

    def __init__(
        self, answers: list[CommandResult] | dict[str, CommandResult], *, strict: bool = False
    ) -> None:
        self.answers = answers
        self.strict = strict
        self.commands: list[str] = []

    def run(self, cmd: Command, *, timeout=None, stdin=None) -> CommandResult:  # type: ignore[override]
        text = to_command(cmd).decode()
        self.commands.append(text)
        if isinstance(self.answers, list):
            return self.answers.pop(0)
        for key, res in self.answers.items():
            if f" {key} " in f" {text} ":
                return res
        if self.strict:
            raise AssertionError(f"unexpected command {text!r}")
        return CommandResult(127, b"", f"{text}: not found".encode())

    def _put_files(self, directory, files, then, first):  # type: ignore[override]
        raise NotImplementedError("CannedTransport answers commands only")

    def write_file(self, path, data, *, mode=0o600):  # type: ignore[override]
        raise NotImplementedError("CannedTransport answers commands only")

    def read_file(self, path, *, offset=0, length=None):  # type: ignore[override]
        raise NotImplementedError("CannedTransport answers commands only")

    def stat_size(self, path):  # type: ignore[override]
        raise NotImplementedError("CannedTransport answers commands only")


def scripted(*answers: CommandResult) -> CannedTransport:
    """A transport answering successive commands with `answers`, in order."""
    return CannedTransport(list(answers))
