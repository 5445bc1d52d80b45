"""What the end push's reader costs the login node: CPU per second of wall time.

    python -m benchmarks.watch_cost_bench

The reader (hpcui.jobs.end_push.watch_command) runs here as it runs on a login node (the
same `sh -c` command line); every process it starts is reaped here (this process is
their subreaper), so its CPU time is counted whole: the loop, every `sleep`, `stat`,
`ls` and `grep`. Two cases, each beside the reader it replaced (the shell loop of one
`stat` per 0.2 s tick and a whole listing per change, the reference, run the same way):

- 10 folders of running jobs, nothing happens (goal: <= 0.1 % of a core);
- one map folder of 30,005 files in which an element ends every 0.2 s.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import sized
from hpcui.jobs import end_push
from hpcui.transport.quoting import quote_bytes

SECONDS = sized(20.0, 2.0)
MAP_FILES = sized(30_005, 3_005)
PR_SET_CHILD_SUBREAPER = 36


def legacy_command(folders: list[str]) -> bytes:
    """The reader before: a shell loop, a `sleep` and a `stat` process every 0.2 s, an
    `ls | grep` of every watched folder whenever one changed."""
    count = f'ls -1 -- "$@" 2>/dev/null | grep -c "{end_push._RESULT_NAME}"'
    inner = (
        f'p=$({count}); m=$(stat -c %y -- "$@" 2>/dev/null); '
        "while sleep 0.2; do "
        'n=$(stat -c %y -- "$@" 2>/dev/null); [ "$n" = "$m" ] && continue; m=$n; '
        f'c=$({count}); [ "$c" = "$p" ] || {{ echo "$c"; p=$c; }}; '
        "done & t=$!; cat >/dev/null; kill $t 2>/dev/null; wait"
    )
    return b"sh -c " + quote_bytes(inner) + b" sh " + b" ".join(map(quote_bytes, folders))


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def reap_all() -> None:
    """Wait for every descendant (orphans come here: this process is their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == 0:  # pragma: no cover - blocking wait
            return


def cost(
    command: bytes, during: Callable[[threading.Event], None], seconds: float = SECONDS
) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, lines pushed) of the reader while `during` runs."""
    reap_all()
    before = children_cpu()
    proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stop = threading.Event()
    worker = threading.Thread(target=during, args=(stop,))
    start = time.monotonic()
    worker.start()
    time.sleep(seconds)
    stop.set()
    worker.join()
    wall = time.monotonic() - start
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()  # the channel closes: the reader ends
    lines = proc.stdout.read().count(b"\n")
    proc.wait()
    reap_all()
    return children_cpu() - before, wall, lines


def steady(command: bytes, during: Callable[[threading.Event], None]) -> tuple[float, float, int]:
    """(% of a core once started, CPU ms of starting, lines pushed): a reader lives as
    long as the client stays connected, so its start is paid once."""
    start_cpu, _, _ = cost(command, idle, 0.0)
    cpu, wall, lines = cost(command, during)
    return 100.0 * max(cpu - start_cpu, 0.0) / wall, 1000.0 * start_cpu, lines


def idle(stop: threading.Event) -> None:
    stop.wait()


def map_ending(folder: Path) -> Callable[[threading.Event], None]:
    """An element's result every 0.2 s (a fresh run: the results of the last one go)."""

    def run(stop: threading.Event) -> None:
        for old in folder.glob("900_*_result.pkl"):
            old.unlink()
        i = 0
        while not stop.wait(0.2):
            (folder / f"900_{i}_0_result.pkl").write_bytes(b"r")
            i += 1

    return run


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    with tempfile.TemporaryDirectory() as tmp:
        folders = []
        for j in range(10):
            f = Path(tmp, f"job{j}")
            f.mkdir()
            (f / f"{100 + j}_0_log.out").write_text("running\n")
            folders.append(str(f))
        big = Path(tmp, "map")
        big.mkdir()
        for i in range(MAP_FILES // 3):
            for name in (f"800_{i}_0_log.out", f"800_{i}_0_log.err", f"800_{i}_submitted.pkl"):
                (big / name).write_bytes(b"")
        print(f"login-node CPU of the end push's reader over {SECONDS:.0f} s (% of one core)")
        cases = (
            ("10 idle job folders", folders, idle),
            (f"1 map folder, {MAP_FILES:,} files, an end per 0.2 s", [str(big)], map_ending(big)),
        )
        for label, watched, during in cases:
            new, new_start, pushed = steady(end_push.watch_command(watched), during)
            old, old_start, old_pushed = steady(legacy_command(watched), during)
            print(
                f"  {label:44s} now {new:6.3f} % ({pushed} pushes; start {new_start:.0f} ms)"
                f"   before {old:6.3f} % ({old_pushed} pushes; start {old_start:.0f} ms)"
            )
    print("goal: <= 0.10 % for the idle folders")


if __name__ == "__main__":
    main()
