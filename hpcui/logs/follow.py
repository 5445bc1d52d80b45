"""Following a job's logs: incremental, offset-based reads through the transport.

``tail -f`` from a laptop without re-downloading: each poll asks the size of the file
(one cheap stat) and reads only the bytes after the last offset, in bounded chunks, so
a multi-GB log is never held in memory nor read twice. A file that does not exist yet
(pending job) is simply empty; a file that shrank (truncated, or replaced by a shorter
one) restarts from 0. A local spool keeps what was read, so a new follower (after a
reconnect, or in a new process) replays it from local disk and reads on from the spooled
offset: nothing is downloaded twice.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypedDict

from pydantic import ConfigDict

from hpcui.backends.job_paths import JobPaths, Stream
from hpcui.backends.model import Model
from hpcui.common.file_lock import locked
from hpcui.errors import UsageError, WaitTimeout
from hpcui.transport import deadline as _deadline
from hpcui.transport.base import Transport

__all__ = [
    "CHUNK_BYTES",
    "LogChunk",
    "LogFollower",
    "LogOptions",
    "LogTimeout",
    "ProgressLines",
    "Stream",
    "follow_many",
    "followers_for",
    "log_path",
]

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # most bytes one read holds in memory
FAST_S = 0.1  # poll interval while the log grows
SLOW_S = 2.0  # ceiling while it is quiet


def log_path(folder: str, job_id: str, task: int, stream: Stream) -> str:
    """Where submitit's layout puts a task's log: ``<folder>/<jobid>_<task>_log.out|err``."""
    try:
        return JobPaths(folder, job_id).log(task, stream)
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None


class LogOptions(TypedDict, total=False):
    """How a job's logs are read, beyond which stream and rank: `follow` until the job ends,
    start `tail_bytes` from the end, give up after `timeout` s, keep a local `spool`, and
    `until()` in place of "the job ended" (the app stops when its screen is hidden)."""

    follow: bool
    tail_bytes: int | None
    timeout: float | None
    spool: bool
    until: Callable[[], bool] | None


class LogChunk(Model):
    """New text of one task's stream; ``offset`` is the byte offset where it started."""

    model_config = ConfigDict(frozen=True)

    task: int
    stream: Stream
    text: str
    offset: int


class LogFollower:
    """Reads one remote file incrementally; ``read()`` returns what is new since last time.

    ``tail_bytes``: on the first read of a file larger than this, skip to its last
    ``tail_bytes`` (from the next line start), so opening a GB log costs a screenful.
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        *,
        tail_bytes: int | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        spool: Path | None = None,
    ) -> None:
        self.transport = transport
        self.path = path
        self.tail_bytes = tail_bytes
        self.chunk_bytes = chunk_bytes
        self.offset = 0
        self.restarts = 0  # times the file shrank and reading restarted at 0
        self.bytes_read = 0  # total transferred (benchmarks and tests read it)
        self.exists = False
        self.size = 0  # the file's size at the last read
        self._size_asked = False  # a replayed spool says nothing of the remote size
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._started = False
        self._spool = spool
        self._spool_fresh = True  # the first write truncates what another file left there
        self._replay: tuple[int, int] | None = None  # (position, end) still to replay
        self._replay_skip_line = False
        self._pending_restart = False  # start_over() was called: the next bytes restart the spool
        if spool is not None:
            self._resume_spool(spool)

    # -- spool -----------------------------------------------------------------------------

    def _meta(self) -> Path:
        assert self._spool is not None
        return self._spool.with_name(self._spool.name + ".json")

    def _resume_spool(self, spool: Path) -> None:
        try:
            meta = json.loads(self._meta().read_text())
        except (OSError, ValueError):
            return
        if meta.get("path") != self.path or not isinstance(meta.get("offset"), int):
            return
        try:
            end = spool.stat().st_size
        except OSError:
            return
        self.offset, self._started, self._spool_fresh = meta["offset"], True, False
        start = 0
        if self.tail_bytes is not None and end > self.tail_bytes:
            start = end - self.tail_bytes
        self._replay = (start, end) if end > start else None
        self._replay_skip_line = start > 0

    def _spool_write(self, data: bytes, *, restart: bool = False) -> None:
        """Append what was just read. Under a lock, and only where the spool ends at the
        offset this read started from: two processes following one file (the app and
        `hpcui logs -f`) never write its bytes twice."""
        if self._spool is None:
            return
        self._spool.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        truncate = restart or self._spool_fresh
        fd = os.open(self._spool, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "wb") as fh, locked(fh, self._spool):
            if not truncate:
                try:
                    meta = json.loads(self._meta().read_text())
                except (OSError, ValueError):
                    meta = {}
                if meta.get("path") != self.path or meta.get("offset") != self.offset - len(data):
                    return  # another follower spooled (or restarted) this file meanwhile
            if truncate:
                fh.truncate(0)
            else:
                fh.seek(0, os.SEEK_END)
            fh.write(data)
            fh.flush()
            self._spool_fresh = False
            self._meta().write_text(json.dumps({"path": self.path, "offset": self.offset}))

    def _read_replay(self) -> str:
        """The next chunk of what an earlier follower spooled: read locally, not again."""
        assert self._replay is not None and self._spool is not None
        pos, end = self._replay
        with open(self._spool, "rb") as fh:
            fh.seek(pos)
            data = fh.read(min(self.chunk_bytes, end - pos))
        pos += len(data)
        self._replay = (pos, end) if data and pos < end else None
        text = self._decoder.decode(data)
        if self._replay_skip_line:
            self._replay_skip_line = False
            text = text.split("\n", 1)[1] if "\n" in text else ""
        return text

    # -- reading ---------------------------------------------------------------------------

    def read(self) -> str:
        """New text since the last call ('' when nothing is new or the file is missing).

        At most ``chunk_bytes`` per call: call again while it returns text to drain.
        A multi-byte character split across reads is held back until it is whole.
        A follower resumed from a spool first replays it from local disk.
        """
        while self._replay is not None:
            if text := self._read_replay():
                return text
        size = self.transport.stat_size(self.path)
        if size is None:
            self.exists = False
            return ""
        self.exists, self.size, self._size_asked = True, size, True
        restart = False
        if size < self.offset:
            log.info("%s shrank from %d to %d bytes: reading from 0", self.path, self.offset, size)
            self.offset, self.restarts, restart = 0, self.restarts + 1, True
            self._decoder.reset()
        skip_partial_line = False
        if not self._started:
            self._started = True
            if self.tail_bytes is not None and size > self.tail_bytes:
                self.offset, skip_partial_line = size - self.tail_bytes, True
        if size == self.offset:
            if restart:
                self._spool_write(b"", restart=True)
            return ""
        length = min(self.chunk_bytes, size - self.offset)
        data = self.transport.read_file(self.path, offset=self.offset, length=length)
        text = self.take(data, restart=restart)
        if skip_partial_line:
            text = text.split("\n", 1)[1] if "\n" in text else ""
        return text

    @property
    def caught_up(self) -> bool:
        """Every byte the last size check saw has been read: a spool still to replay, or
        a size never asked (a follower resumed from its spool), is not caught up."""
        return self._replay is None and self._size_asked and self.offset >= self.size

    def start_over(self) -> None:
        """The file was truncated or replaced (a reader on the login node saw it, where a
        size check cannot: a new file as long as the old one): read it again from 0."""
        self.offset, self.restarts = 0, self.restarts + 1
        self._decoder.reset()
        self._pending_restart = True

    def take(self, data: bytes, *, restart: bool = False) -> str:
        """Bytes that follow `offset` (read here, or pushed by a reader on the login
        node): counted, spooled, decoded."""
        if self._pending_restart and data:
            restart, self._pending_restart = True, False
        self.offset += len(data)
        self.bytes_read += len(data)
        self._spool_write(data, restart=restart)
        return self._decoder.decode(data)

    def drain(self) -> Iterator[str]:
        """Everything available now, chunk by chunk (bounded memory)."""
        for chunk in drain_chunks(0, self, "stdout", None):
            yield chunk.text

    def follow(
        self,
        done: Callable[[], bool] | None = None,
        *,
        fast_s: float = FAST_S,
        slow_s: float = SLOW_S,
        timeout: float | None = None,
    ) -> Iterator[str]:
        """Yield text as it appears until ``done()`` is true and the file is drained.

        Polls every ``fast_s`` while text arrives, backing off to ``slow_s`` while the
        file is quiet (an idle follower costs one stat per ``slow_s``).
        """
        for chunk in follow_many({0: self}, done, fast_s=fast_s, slow_s=slow_s, timeout=timeout):
            yield chunk.text


def follow_many(
    followers: dict[int, LogFollower],
    done: Callable[[], bool] | None = None,
    *,
    stream: Stream = "stdout",
    fast_s: float = FAST_S,
    slow_s: float = SLOW_S,
    timeout: float | None = None,
) -> Iterator[LogChunk]:
    """Follow several tasks' files round-robin; stops once ``done()`` and all are drained.

    ``done=None`` reads what is there once and returns (no following). (Pushed following,
    without polls: `hpcui.logs.push.follow_pushed`.)
    """
    ends = _deadline.ends_after(timeout)
    interval = fast_s
    while True:
        with _deadline.within(_deadline.rest(ends)):
            finished = done is None or done()  # asked BEFORE the last reads: nothing is lost
        got = False
        for task, follower in followers.items():
            for chunk in drain_chunks(task, follower, stream, ends):
                got = True
                yield chunk
        if finished:
            return
        if ends is not None and time.monotonic() >= ends:
            raise LogTimeout.following(followers, timeout)
        interval = fast_s if got else min(slow_s, interval * 1.5)
        time.sleep(interval)


def drain_chunks(
    task: int, follower: LogFollower, stream: Stream, ends: float | None
) -> Iterator[LogChunk]:
    """Everything a follower can read now, each read within the caller's time (a stalled
    link ends it instead of hanging the follow)."""
    while True:
        start = follower.offset
        with _deadline.within(_deadline.rest(ends)):
            text = follower.read()
        if not text:
            return
        yield LogChunk(task=task, stream=stream, text=text, offset=start)
        if follower.caught_up:
            return


class LogTimeout(WaitTimeout):
    """Following a log took longer than the caller allowed."""

    @classmethod
    def following(cls, followers: dict[int, LogFollower], timeout: float | None) -> LogTimeout:
        return cls(
            f"Still following {', '.join(f.path for f in followers.values())} after "
            f"{timeout} s and the job has not ended. Follow again, or cancel the job."
        )


class ProgressLines:
    """Complete lines from streamed text, with ``\\r`` progress updates collapsed.

    tqdm redraws a bar with ``\\r``; a log viewer wants the last state of each line, not
    thousands of redraws. ``feed`` returns the lines completed by the new text;
    ``current`` is the unfinished line as a terminal would show it now.
    """

    def __init__(self) -> None:
        self._buf = ""

    def feed(self, text: str) -> list[str]:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        return [_visible(line) for line in lines]

    @property
    def current(self) -> str:
        return _visible(self._buf)


#: the runtime's own chatter in a job's log: submitit's INFO/DEBUG lines
#: (`submitit INFO (2026-11-26 08:25:56,746) - Starting with JobEnvironment(...)`);
#: its warnings and errors are kept
RUNTIME_LINE = re.compile(r"submitit (?:INFO|DEBUG) \(\d{4}-\d\d-\d\d [\d:,.]+\) - ")


def is_runtime_line(line: str) -> bool:
    return RUNTIME_LINE.match(line) is not None


class QuietRuntime:
    """Drops the runtime's own lines from streamed text (`hpcui logs --quiet-runtime`);
    an unfinished last line waits for its end (`flush` gives it at the end)."""

    def __init__(self) -> None:
        self._partial = ""

    def feed(self, text: str) -> str:
        *lines, self._partial = (self._partial + text).split("\n")
        return "".join(f"{line}\n" for line in lines if not is_runtime_line(line))

    def flush(self) -> str:
        rest, self._partial = self._partial, ""
        return "" if is_runtime_line(rest) else rest


def _visible(line: str) -> str:
    """What a terminal shows for a line with carriage returns: the last non-empty redraw."""
    return line.rstrip("\r").rsplit("\r", 1)[-1]


def followers_for(
    transport: Transport,
    folder: str,
    job_id: str,
    tasks: Sequence[int],
    stream: Stream,
    *,
    tail_bytes: int | None = None,
    spool_dir: Path | None = None,
) -> dict[int, LogFollower]:
    """One follower per task (rank) of a job; with `spool_dir`, each keeps a local spool."""
    out = {}
    for t in tasks:
        path = log_path(folder, job_id, t, stream)
        spool = None if spool_dir is None else spool_path(spool_dir, path)
        out[t] = LogFollower(transport, path, tail_bytes=tail_bytes, spool=spool)
    return out


def spool_path(spool_dir: Path, remote_path: str) -> Path:
    """A spool file per remote file: named by a hash, so a reused job id (a controller that
    restarted its numbering) never resumes another job's log."""
    digest = hashlib.sha256(remote_path.encode()).hexdigest()[:24]
    return spool_dir / f"{digest}.log"
