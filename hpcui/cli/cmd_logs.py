"""logs: a job's output as it is (or was) written, made safe for a terminal."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from hpcui.cli import EXIT_OK
from hpcui.cli import output as out
from hpcui.cli.common import job_handle
from hpcui.errors import UsageError

if TYPE_CHECKING:
    from hpcui.logs.follow import Stream


def cmd_logs(args: argparse.Namespace) -> int:
    from hpcui.backends.states import JobState
    from hpcui.common.terminal_text import safe_text
    from hpcui.logs.follow import (
        LogChunk,
        QuietRuntime,
    )

    job = job_handle(args, args.job)
    # one filter per rank: a rank's unfinished line waits for that rank's next text
    quiet: dict[int, QuietRuntime] | None = {} if args.quiet_runtime else None

    # a terminal obeys escapes in a job's output (clipboard, title, clearing the screen)
    safe = not args.json and not args.raw and sys.stdout.isatty()

    def shown(chunk: LogChunk) -> LogChunk:
        text = chunk.text
        if quiet is not None:
            text = quiet.setdefault(chunk.task, QuietRuntime()).feed(text)
        if safe:
            text = safe_text(text)
        return chunk if text is chunk.text else chunk.model_copy(update={"text": text})

    def rest() -> str:
        tail = "".join(q.flush() for q in (quiet or {}).values())
        return safe_text(tail) if safe else tail

    if job.details is not None:  # a job hpcui did not submit: the scheduler's description
        job_id, details = job.job_id, job.details
        if args.rank not in (None, 0):
            raise UsageError(f"Job {job_id} was not submitted by hpcui: it has no --rank.")
        if details.state is JobState.PENDING:  # its file is not its log yet
            out.note(
                f"job {job_id} is pending: its log begins when it starts"
                + (" (waiting for it)" if args.follow else f" (`hpcui logs -f {job_id}` waits)")
            )
        if details.log_note:
            out.note(details.log_note)
        chunks = job.logs("stderr" if args.stderr else "stdout", follow=args.follow)
        for chunk in map(shown, chunks):
            if not chunk.text:
                continue
            if args.json:
                out.emit_json_line(LogChunk, chunk)
            else:
                sys.stdout.write(chunk.text)
                sys.stdout.flush()
        if not args.json:
            sys.stdout.write(rest())
        return EXIT_OK
    stream: Stream = "stderr" if args.stderr else "stdout"
    if args.rank is not None and not 0 <= args.rank < job.num_tasks:
        raise UsageError(
            f"Job {job.job_id} has {job.num_tasks} task(s): --rank must be 0..{job.num_tasks - 1}."
        )
    headers = args.rank is None and job.num_tasks > 1 and not args.json
    target = sys.stdout
    last = None
    for chunk in map(shown, job.logs(stream, args.rank, follow=args.follow)):
        if not chunk.text:
            continue
        if args.json:
            out.emit_json_line(LogChunk, chunk)
            continue
        if headers and chunk.task != last:
            target.write(out.style(f"==> rank {chunk.task} <==", "bold") + "\n")
            last = chunk.task
        target.write(chunk.text)
        target.flush()
    if not args.json:
        target.write(rest())
    return EXIT_OK
