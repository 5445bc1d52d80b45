"""Pushed log following: a reader on the login node sends what a job appends.

Polling costs a stat round trip per interval and delivers a line ~half an interval late
(p95 ~100 ms at 0.1 s). Here each followed file gets `tail -F` on its own exec channel
of the one connection: GNU tail waits on inotify (or polls the file every 0.2 s on the
login node itself where inotify cannot see writes, as on GPFS/Lustre), so a line reaches
the laptop about one network round trip after it was written, and a quiet job costs
nothing. What tail sends is taken exactly like a polled read (`LogFollower.take`:
offset, spool, decoder), so both paths can hand over to each other at any byte:

- a file that does not exist yet (pending job) is polled until it does;
- tail's notices come in the data stream (`2>&1`), so in order with the bytes: what came
  before a notice of a truncated or replaced file (rotation) is taken, then the file is
  read again from 0 by polls (a size check alone misses a new file as long as the old
  one) and a new reader starts where they stopped; bytes that may begin a notice cut by
  a read wait for the next read;
- a reader that ends (dropped link, killed tail) is restarted from the offset; after
  MAX_RESTARTS that follower is polled for good, as it is where no reader can start;
- once `done()`, readers are closed and every file is drained by polls: nothing is lost.

The reader dies with its channel: `cat` on its stdin sees EOF when the channel closes or
the link drops, and kills tail — no orphan on the login node.
"""

from __future__ import annotations

import contextlib
import select
import shlex
import time
from collections.abc import Callable, Iterator

from hpcui.errors import HpcuiError
from hpcui.logs.follow import LogChunk, LogFollower, LogTimeout, Stream, drain_chunks, follow_many
from hpcui.transport import deadline as _deadline
from hpcui.transport.base import RemoteStream
from hpcui.transport.quoting import quote_bytes

#: how long a wait for pushed bytes lasts before done() is asked again
WAIT_S = 0.25
MAX_RESTARTS = 5
#: tail's notices after which its byte count no longer matches the file's
_RESYNC = (b"file truncated", b"following new file")
#: how tail's notices start; they come in the data stream (2>&1), so in order with it
_NOTICE = b"tail: "


def split_notice(out: bytes) -> tuple[bytes, bytes | None, bytes, bool]:
    """(data before tail's first notice, the notice line, what follows, unsure).

    `unsure`: the bytes end in what may be the start of a notice cut by the read: the
    data before it is certain; the rest (returned as what follows) waits for the next
    read to tell.
    """
    i = out.find(_NOTICE)
    if i < 0:
        for n in range(len(_NOTICE) - 1, 0, -1):  # "t", "ta", ... "tail:" at the very end
            if out.endswith(_NOTICE[:n]):
                return out[:-n], None, out[-n:], True
        return out, None, b"", False
    j = out.find(b"\n", i)
    if j < 0:
        return out[:i], None, out[i:], True
    return out[:i], out[i : j + 1], out[j + 1 :], False


def push_command(path: str, offset: int) -> bytes:
    """tail from `offset`, following truncation and rotation; it ends with its channel."""
    inner = (
        f"LC_ALL=C tail -s 0.2 -c +{offset + 1} -F -- {shlex.quote(path)} 2>&1 & t=$!; "
        "cat >/dev/null; kill $t 2>/dev/null"
    )
    return b"sh -c " + quote_bytes(inner)


def _open(f: LogFollower) -> RemoteStream | None:
    try:
        return f.transport.open_stream(push_command(f.path, f.offset))
    except HpcuiError:
        return None  # polled this round; the next round tries again


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
    restarts = dict.fromkeys(followers, 0)
    polled_only: set[int] = set()
    held: dict[int, bytes] = {}  # a reader's last bytes that may begin a notice
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
                reader = _open(f)
                if reader is None:
                    restarts[task] += 1
                    if restarts[task] > MAX_RESTARTS:
                        polled_only.add(task)
                else:
                    readers[task] = reader
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
                out = held.pop(task, b"") + reader.read()[0]
                resync = False
                while out:
                    data, notice, out, unsure = split_notice(out)
                    if data:
                        start = f.offset
                        if text := f.take(data):
                            yield LogChunk(task=task, stream=stream, text=text, offset=start)
                    if unsure:  # maybe a notice cut by the read: the next read tells
                        held[task] = out
                        break
                    resync = notice is not None and any(word in notice for word in _RESYNC)
                    if resync:
                        break
                if resync:  # a new file, or the old one emptied: polls read it from 0,
                    f.start_over()  # then a new reader (what followed the notice is in it)
                    reader.close()
                    del readers[task]
                    continue
                if reader.ended:  # bytes still held were not taken: polls read them
                    held.pop(task, None)
                    reader.close()
                    del readers[task]
                    restarts[task] += 1
                    if restarts[task] > MAX_RESTARTS:
                        polled_only.add(task)
    finally:
        for reader in readers.values():
            with contextlib.suppress(Exception):
                reader.close()
