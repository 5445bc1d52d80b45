"""A job's end pushed from the login node: the status poll is asked at once, not in 30 s.

The status service backs off to one scheduler call per 30 s while jobs run, so a waiter
(`result()`, `wait()`, `--wait`, `--follow`, the app, the agent) heard of an end up to
30 s late. The end of an hpcui job is its result file appearing in its job folder, so
one reader per cluster, on its own exec channel of the open connection (as the log push),
watches the folders of the jobs still running: every TICK_S it stats them (one `stat`
for all: a directory's mtime changes when a file is created or renamed into it, not
when a log grows) and, only when one changed, counts their result files; a new count is
one line to the client, which polls the scheduler at once. The scheduler still decides
what the state is: the push only says when to ask. With no connection open (or a
transport that cannot stream) nothing is pushed and the poll alone goes on. The reader
dies with its channel (`cat` on stdin), as the log push's does.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
from collections.abc import Callable, Iterable

from hpcui.backends.job_paths import RESULT_GLOB
from hpcui.errors import HpcuiError
from hpcui.transport.base import RemoteStream, Transport
from hpcui.transport.quoting import quote_bytes

log = logging.getLogger(__name__)

#: how often the login node looks at the folders (a stat each: cheap even on GPFS/Lustre)
TICK_S = 0.2
#: readers that ended (dropped link, killed) are restarted this often, then only polls
MAX_RESTARTS = 5
#: a result file's name, as grep finds it in `ls` output (`*_result.pkl`: job_paths')
_RESULT_NAME = RESULT_GLOB.lstrip("*").replace(".", "[.]") + "$"


#: the login node's reader where it has python3: no process started per tick, each
#: folder one stat per tick, a tick from FAST_S backing off to SLOW_S while nothing
#: changes, and a changed folder listed at most once per SCAN_S (a map's folder holds
#: tens of thousands of files): a connected client with idle jobs costs next to nothing
WATCHER = """
import os, select, sys, time
FAST_S, SLOW_S, SCAN_S, END = %(fast)s, %(slow)s, %(scan)s, %(end)r
folders = sys.argv[1:]
def stamp(f):
    try:
        return os.stat(f).st_mtime_ns
    except OSError:
        return None
def count(f):
    n = 0
    try:
        with os.scandir(f) as entries:
            for e in entries:
                n += e.name.endswith(END)
    except OSError:
        pass
    return n
seen = {f: stamp(f) for f in folders}
counts = {f: count(f) for f in folders}
scanned = dict.fromkeys(folders, time.monotonic())
dirty = set()
tick = FAST_S
while True:
    if select.select([0], [], [], tick)[0] and not os.read(0, 65536):
        break  # the channel closed: the client is gone
    now = time.monotonic()
    for f in folders:
        m = stamp(f)
        if m != seen[f]:
            seen[f] = m
            dirty.add(f)
    news = False
    for f in sorted(dirty):
        if now - scanned[f] >= SCAN_S or counts[f] == 0 and now - scanned[f] >= FAST_S:
            scanned[f] = now
            dirty.discard(f)
            c = count(f)
            news = news or c != counts[f]
            counts[f] = c
    if news:
        sys.stdout.write("%%d\\n" %% sum(counts.values()))
        sys.stdout.flush()
    tick = FAST_S if dirty or news else min(SLOW_S, tick * 1.5)
"""
FAST_S, SLOW_S, SCAN_S = 0.2, 0.5, 1.0


def watch_command(folders: Iterable[str]) -> bytes:
    """The login node's side: one line (the count of result files) whenever it changes.
    python3 where the login node has it (see WATCHER), else a shell loop."""
    code = WATCHER % {"fast": FAST_S, "slow": SLOW_S, "scan": SCAN_S,
                      "end": RESULT_GLOB.lstrip("*")}  # fmt: skip
    count = f'ls -1 -- "$@" 2>/dev/null | grep -c "{_RESULT_NAME}"'
    inner = (
        'c=$1; shift; command -v python3 >/dev/null 2>&1 && exec python3 -c "$c" "$@"; '
        f'p=$({count}); m=$(stat -c %y -- "$@" 2>/dev/null); '
        f"while sleep {TICK_S}; do "
        'n=$(stat -c %y -- "$@" 2>/dev/null); [ "$n" = "$m" ] && continue; m=$n; '
        f'c=$({count}); [ "$c" = "$p" ] || {{ echo "$c"; p=$c; }}; '
        "done & t=$!; cat >/dev/null; kill $t 2>/dev/null"
    )
    args = b" ".join(quote_bytes(f) for f in sorted(folders))
    return b"sh -c " + quote_bytes(inner) + b" sh " + quote_bytes(code) + b" " + args


class EndPush:
    """One reader per cluster over the folders of its unsettled jobs; `on_end()` on news."""

    def __init__(
        self,
        transport: Transport,
        folder_of: Callable[[str], str | None],
        on_end: Callable[[], None],
    ) -> None:
        self.transport = transport
        self.folder_of = folder_of
        self.on_end = on_end
        self.restarts = 0
        self.pushes = 0  # lines heard (for tests and benchmarks)
        self._folders: frozenset[str] = frozenset()
        self._stream: RemoteStream | None = None
        #: job id -> its folder: asked of the registry once per job, not on every pass of
        #: the status loop over every unsettled job
        self._folder_of: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def watching(self) -> frozenset[str]:
        return self._folders if self._stream is not None else frozenset()

    def follow(self, job_ids: Iterable[str]) -> None:
        """Watch the folders of these jobs (the unsettled ones): a reader is (re)started
        when the set changes or the last one ended; none when there is nothing to watch."""
        folders = frozenset(f for j in job_ids if (f := self._folder(j)))
        with self._lock:
            alive = self._stream is not None and not self._stream.ended
            if self._closed or (folders == self._folders and (alive or not folders)):
                return
            if not alive and self._stream is not None and folders == self._folders:
                self.restarts += 1  # the same folders, but the reader ended
            if self.restarts > MAX_RESTARTS:
                return  # a login node where no reader can start: polls only
            self._stop_stream()
            self._folders = folders
            if not folders:
                return
            try:
                self._stream = self.transport.open_stream(watch_command(folders))
            except HpcuiError as exc:  # polled meanwhile; the next loop tries again
                log.debug("no end push on %s: %s", self.transport.description, exc)
                self._stream = None
                self.restarts += 1
                return
            if self._stream is None:  # a transport that cannot stream: polls only
                self.restarts = MAX_RESTARTS + 1
                return
            stream = self._stream
        threading.Thread(
            target=self._read, args=(stream,), name="hpcui-end-push", daemon=True
        ).start()
        # A result that appeared while no reader ran is in the new reader's first count,
        # so it is never news: one poll now hears of it.
        self.on_end()

    def _folder(self, job_id: str) -> str | None:
        folder = self._folder_of.get(job_id)
        if folder is None:  # asked again until the registry knows it; never changes after
            folder = self.folder_of(job_id)
            if folder is not None:
                self._folder_of[job_id] = folder
        return folder

    def _read(self, stream: RemoteStream) -> None:
        while not stream.ended:
            select.select([stream], [], [], 1.0)
            try:
                out = stream.read()[0]
            except Exception:  # a closed channel: the status loop starts another
                return
            if out.strip():
                self.pushes += out.count(b"\n")
                self.restarts = 0  # this login node can push: a later drop may retry
                self.on_end()

    def _stop_stream(self) -> None:
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()
            self._stream = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop_stream()
