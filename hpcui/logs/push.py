"""Pushed log following: a reader on the login node sends what a job appends.

Polling costs a stat round trip per interval and delivers a line ~half an interval late
(p95 ~100 ms at 0.1 s). Here each followed file gets `tail -F` on its own exec channel
of the one connection: GNU tail waits on inotify (or polls the file every 0.2 s on the
login node itself where inotify cannot see writes, as on GPFS/Lustre), so a line reaches
the laptop about one network round trip after it was written, and a quiet job costs
nothing. What tail sends is taken exactly like a polled read (`LogFollower.take`:
offset, spool, decoder), so both paths can hand over to each other at any byte:

- a file that does not exist yet (pending job) is polled until it does;
- the data stream holds only the file's bytes: tail's notices go to its stderr, so a job
  that prints "tail: " (or "detail: ... file truncated") is shown as it printed it. A
  notice of a truncated or replaced file (rotation) ends that reader; what it pushed in
  the same read may already be the new file's, so it is not taken: the file is read
  again from 0 by polls (a size check alone misses a new file as long as the old one),
  and a new reader starts where they stopped;
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
#: tail's notices (its stderr) after which its byte count no longer matches the file's
_SHRANK = "file truncated"
_RESYNC = (_SHRANK.encode(), b"following new file")


def resync_notice(err: bytes) -> bool:
    """tail said, on its stderr, that its byte count no longer matches the file's."""
    return any(word in line for line in err.splitlines() for word in _RESYNC)


def push_command(path: str, offset: int) -> bytes:
    """tail from `offset`, following truncation and rotation; it ends with its channel.

    A file already shorter than `offset` (truncated between the last read and this start)
    is said like tail says it, and no tail starts: tail would say it too, but with the new
    file's bytes right behind, and sshd sends a command's stdout before its stderr when
    both are waiting, so those bytes could arrive before the notice that they restart."""
    quoted = shlex.quote(path)
    inner = (
        f'[ "$(wc -c 2>/dev/null < {quoted})" -ge {offset} ] 2>/dev/null || '
        f"{{ echo 'hpcui: {_SHRANK}' >&2; exit 0; }}; "
        f"LC_ALL=C tail -s 0.2 -c +{offset + 1} -F -- {quoted} & t=$!; "
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
    notices: dict[int, bytes] = {}  # a reader's stderr, whole lines looked at
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
                data, err = reader.read()
                err = notices.pop(task, b"") + err
                lines, _, rest = err.rpartition(b"\n")
                if rest:
                    notices[task] = rest  # a notice cut by the read: the next read ends it
                if resync_notice(lines):  # a new file, or the old one emptied: polls read
                    notices.pop(task, None)  # it from 0, then a new reader starts
                    f.start_over()
                    reader.close()
                    del readers[task]
                    continue
                if data:
                    start = f.offset
                    if text := f.take(data):
                        yield LogChunk(task=task, stream=stream, text=text, offset=start)
                if reader.ended:  # polls read on from its offset
                    notices.pop(task, None)
                    reader.close()
                    del readers[task]
                    restarts[task] += 1
                    if restarts[task] > MAX_RESTARTS:
                        polled_only.add(task)
    finally:
        for reader in readers.values():
            with contextlib.suppress(Exception):
                reader.close()
