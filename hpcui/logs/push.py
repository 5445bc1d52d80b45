"""Pushed log following: a reader on the login node sends what a job appends.

Polling costs a stat round trip per interval and delivers a line ~half an interval late
(p95 ~100 ms at 0.1 s). Here each followed file gets `tail -F` on its own exec channel
of the one connection: GNU tail waits on inotify (or polls the file every 0.2 s on the
login node itself where inotify cannot see writes, as on GPFS/Lustre), so a line reaches
the laptop about one network round trip after it was written, and a quiet job costs
nothing. What tail sends is taken exactly like a polled read (`LogFollower.take`:
offset, spool, decoder), so both paths can hand over to each other at any byte:

- a file that does not exist yet (pending job) is polled until it does;
- tail's notices share its data stream (`2>&1`): only one pipe keeps their order, and the
  order is the point (sshd sends a command's stdout before its stderr when both wait, so
  on two pipes a new file's bytes could arrive before the notice that they are a new
  file's, and were taken twice). A notice names the file as tail was given it, and each
  reader gives it the path spelled with a random run of no-op `./` and `.//` components,
  so a notice is known by that mark and a job that prints "tail: " (or "detail: ... file
  truncated") is shown as it printed it (`NoticeCutter`). At a notice of a truncated or
  replaced file (rotation) the reader ends: the bytes before it are taken, nothing after
  it, polls read the file again from 0 (a size check alone misses a new file as long as
  the old one), and a new reader starts where they stopped. A notice that the file went
  away or cannot be read is dropped, and tail goes on. tail's few notices that name no
  file (inotify ran out) end the reader too, and polls read on from the offset: what
  looked like one but was the job's output is in the file, and is read from there;
- a reader that ends (dropped link, killed tail) is restarted from the offset; after
  MAX_RESTARTS that follower is polled for good, as it is where no reader can start;
- once `done()`, readers are closed and every file is drained by polls: nothing is lost.

The reader dies with its channel: `cat` on its stdin sees EOF when the channel closes or
the link drops, and kills tail — no orphan on the login node.
"""

from __future__ import annotations

import contextlib
import secrets
import select
import shlex
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

from hpcui.errors import HpcuiError
from hpcui.logs.follow import LogChunk, LogFollower, LogTimeout, Stream, drain_chunks, follow_many
from hpcui.transport import deadline as _deadline
from hpcui.transport.base import RemoteStream
from hpcui.transport.quoting import quote_bytes

#: how long a wait for pushed bytes lasts before done() is asked again
WAIT_S = 0.25
MAX_RESTARTS = 5
#: notices after which the bytes tail sends are a new file's, from its first byte
_RESYNC = (b"file truncated", b"following new file", b"has become accessible")
#: tail's notices that name no file (LC_ALL=C): inotify ran out, and tail polls on
_UNNAMED = (b"tail: inotify ", b"tail: directory containing watched file was removed")
TOKEN_BITS = 40


def new_token() -> str:
    """A mark no job prints: no-op path components, one of two spellings per bit."""
    bits = secrets.randbits(TOKEN_BITS)
    return "".join(".//" if bits >> i & 1 else "./" for i in range(TOKEN_BITS))


def _lead(path: str, token: str) -> str:
    """How `spelled(path, token)` starts: tail's notices name the file starting so."""
    return ("/" if path.startswith("/") else "./") + token


def spelled(path: str, token: str) -> str:
    """`path` with `token` right after its first slash: the same file, named by tail's
    notices with the token in them (quoted or not, the name starts the same way)."""
    return _lead(path, token) + path.lstrip("/")


def push_command(path: str, offset: int, token: str) -> bytes:
    """tail from `offset`, following truncation and rotation, its notices in its data
    stream; it ends with its channel."""
    inner = (
        f"LC_ALL=C tail -s 0.2 -c +{offset + 1} -F -- {shlex.quote(spelled(path, token))} "
        "2>&1 & t=$!; cat >/dev/null; kill $t 2>/dev/null"
    )
    return b"sh -c " + quote_bytes(inner)


class Notice(NamedTuple):
    """One of tail's notices: `named` when it names the followed file (its mark in it)."""

    text: bytes
    named: bool

    @property
    def resync(self) -> bool:
        """The bytes tail sends next are a new file's, from its first byte."""
        return self.named and any(word in self.text for word in _RESYNC)


class NoticeCutter:
    """Splits what one reader sends into the file's bytes and tail's notices.

    `feed` returns the file's bytes up to the first notice, and that notice (or None);
    what follows a notice waits for the next call (`feed(b"")` gives it). It holds back a
    last few bytes that may begin a notice until the rest arrives (a reader that ends
    with them held leaves them to polls, which read them from the file)."""

    def __init__(self, path: str, token: str) -> None:
        lead = _lead(path, token).encode()
        self.named = (b"tail: " + lead, b"tail: '" + lead)
        self.marks = (*self.named, *_UNNAMED)
        self._held = b""

    def feed(self, data: bytes) -> tuple[bytes, Notice | None]:
        buf, self._held = self._held + data, b""
        found = [(i, m) for m in self.marks if (i := buf.find(m)) >= 0]
        if found:
            start, mark = min(found)
            end = buf.find(b"\n", start)
            if end < 0:
                self._held = buf[start:]
                return buf[:start], None
            self._held = buf[end + 1 :]
            return buf[:start], Notice(buf[start : end + 1], mark in self.named)
        keep = max(
            (n for m in self.marks for n in range(1, len(m)) if buf.endswith(m[:n])), default=0
        )
        if keep:
            buf, self._held = buf[:-keep], buf[-keep:]
        return buf, None


def _open(f: LogFollower) -> tuple[RemoteStream, NoticeCutter] | None:
    token = new_token()
    try:
        stream = f.transport.open_stream(push_command(f.path, f.offset, token))
    except HpcuiError:
        return None  # polled this round; the next round tries again
    return None if stream is None else (stream, NoticeCutter(f.path, token))


def read_or_follow(
    followers: dict[int, LogFollower],
    done: Callable[[], bool] | None,
    *,
    mode: str = "push",
    stream: Stream = "stdout",
    timeout: float | None = None,
) -> Iterator[LogChunk]:
    """What is there now (`done` None), or following until `done()`: pushed where the
    profile's `log_follow` says "push", else polled. The one choice for every log."""
    if done is not None and mode == "push":
        return follow_pushed(followers, done, stream=stream, timeout=timeout)
    return follow_many(followers, done, stream=stream, timeout=timeout)


def follow_pushed(
    followers: dict[int, LogFollower],
    done: Callable[[], bool],
    *,
    stream: Stream = "stdout",
    timeout: float | None = None,
    slow_s: float = 2.0,
) -> Iterator[LogChunk]:
    """Like `hpcui.logs.follow.follow_many`, with the bytes pushed (see the module's doc)."""
    ends = _deadline.ends_after(timeout)
    readers: dict[int, RemoteStream] = {}
    cutters: dict[int, NoticeCutter] = {}
    restarts = dict.fromkeys(followers, 0)
    polled_only: set[int] = set()
    wait = WAIT_S
    try:
        while True:
            with _deadline.within(_deadline.rest(ends)):
                finished = done()
            got = False
            for task, f in followers.items():
                if task in readers:
                    continue
                for chunk in drain_chunks(task, f, stream, ends):  # catch up, or poll
                    got = True
                    yield chunk
                if finished or task in polled_only or not f.exists:
                    continue
                opened = _open(f)
                if opened is None:
                    restarts[task] += 1
                    if restarts[task] > MAX_RESTARTS:
                        polled_only.add(task)
                else:
                    readers[task], cutters[task] = opened
            if finished:
                for reader in readers.values():
                    reader.close()
                readers.clear()
                for task, f in followers.items():  # everything written: by polls
                    yield from drain_chunks(task, f, stream, ends)
                return
            if ends is not None and time.monotonic() >= ends:
                raise LogTimeout.following(followers, timeout)
            if readers:
                wait = WAIT_S
                select.select(list(readers.values()), [], [], WAIT_S)
            else:  # nothing pushed: poll with the usual backoff
                wait = WAIT_S if got else min(slow_s, wait * 1.5)
                time.sleep(wait)
            for task, reader in list(readers.items()):
                f = followers[task]
                data, _ = reader.read()  # its stderr: the shell's own words, if any
                stop: Notice | None = None
                while True:
                    data, notice = cutters[task].feed(data)
                    if data:
                        start = f.offset
                        if text := f.take(data):
                            yield LogChunk(task=task, stream=stream, text=text, offset=start)
                    if notice is None:
                        break
                    if notice.resync or not notice.named:
                        stop = notice  # polls read on from the offset (from 0: a resync)
                        break
                    data = b""  # the file went away, or cannot be read: tail goes on
                if stop is not None or reader.ended:
                    reader.close()
                    del readers[task], cutters[task]
                    if stop is not None and stop.resync:
                        f.start_over()  # a new file, or the old one emptied
                    else:  # the link dropped, tail ended, or its words named no file
                        restarts[task] += 1
                        if restarts[task] > MAX_RESTARTS:
                            polled_only.add(task)
    finally:
        for reader in readers.values():
            with contextlib.suppress(Exception):
                reader.close()
