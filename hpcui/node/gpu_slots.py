"""GPUs of the local cluster handed to jobs, first come first served, never shared.

The local launcher runs `python -m hpcui.node.gpu_slots acquire STATE JOB PID N IDS
TICKET` before it starts a job's ranks (TICKET: the submit time in ns, so the line is in
submit order, not in the order launchers happen to start); it prints the N GPU ids the job gets (for
CUDA_VISIBLE_DEVICES) once they are free and the job is first in line. While it waits,
`STATE/<job>.wait` says why (the job shows PENDING with that reason). Everything lives in
files under `STATE/gpus/` and changes only under one flock:

- `held/<job>`: "<launcher pid> <id>,<id>..." — the job's GPUs; removed when it ends;
- `queue/<job>`: "<launcher pid> <ticket> <n>" — waiting, oldest ticket first.

A holder or waiter whose launcher is gone (killed, cancelled, crashed) or whose job has
an outcome (`STATE/<job>.rc`) frees its place at the next look; but a holder whose
SIGKILLed launcher left ranks running (they are in its process group, which outlives
it) keeps its GPUs until they end or are cancelled.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from hpcui.common.file_lock import locked

POLL_S = 0.5


def _alive(state: Path, job: str, pid: int) -> bool:
    if (state / f"{job}.rc").exists():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    return True


def _holding(state: Path, job: str, pid: int) -> bool:
    """The job still uses its GPUs: its launcher runs, or (the launcher SIGKILLed) ranks of
    its process group still run hpcui's runner (asked only then: one pgrep)."""
    if _alive(state, job, pid):
        return True
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        found = subprocess.run(
            ["pgrep", "-g", str(pid), "-f", "hpcui.node.signed"],
            capture_output=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):  # no pgrep: the group is enough
        return True
    return found.returncode == 0


def _entries(folder: Path, state: Path) -> dict[str, list[str]]:
    """Live entries of held/ or queue/ (dead ones are removed)."""
    out = {}
    for f in folder.iterdir():
        try:
            fields = f.read_text(encoding="ascii").split()
            pid = int(fields[0])
        except (OSError, ValueError, IndexError):
            fields, pid = [], -1
        alive = _holding if folder.name == "held" else _alive
        if pid > 0 and alive(state, f.name, pid):
            out[f.name] = fields
        else:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    return out


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    with open(root / "lock", "a+b") as fd, locked(fd, root / "lock"):
        yield


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def try_acquire(
    state: Path, job: str, pid: int, count: int, ids: list[str], ticket: int = 0
) -> list[str] | None:
    """One look: the GPUs if this job may start now, else None (and its wait reason set).
    `ticket` orders the line (0: now)."""
    root = state / "gpus"
    for sub in ("held", "queue"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    with _locked(root):
        held = _entries(root / "held", state)
        if job in held:  # asked again (a retry): the same GPUs
            return held[job][1].split(",")
        queue = _entries(root / "queue", state)
        if job not in queue:
            queue[job] = [str(pid), f"{ticket or time.time_ns():020d}", str(count)]
            _write(root / "queue" / job, " ".join(queue[job]))
        busy = {i for fields in held.values() for i in fields[1].split(",")}
        free = [i for i in ids if i not in busy]
        ahead = sorted((f[1], name) for name, f in queue.items() if f[1] < queue[job][1])
        if not ahead and len(free) >= count:
            got = free[:count]
            _write(root / "held" / job, f"{pid} {','.join(got)}")
            (root / "queue" / job).unlink()
            with contextlib.suppress(FileNotFoundError):
                (state / f"{job}.wait").unlink()
            return got
        if ahead:
            reason = (
                f"Priority: {len(ahead)} job(s) ahead of it for GPUs (first come, first "
                f"served; next: {ahead[0][1]})"
            )
        else:
            holders = ", ".join(sorted(held)) or "-"
            reason = (
                f"Resources: waiting for {count} GPU(s); {len(free)} of {len(ids)} free "
                f"(held by job(s) {holders})"
            )
        _write(state / f"{job}.wait", reason + "\n")
        return None


def acquire(
    state: Path, job: str, pid: int, count: int, ids: list[str], ticket: int = 0
) -> list[str]:
    """Wait until the job may have `count` GPUs (unbounded on purpose: a pending job
    waits until GPUs free up or it is cancelled, which kills this process)."""
    while True:
        got = try_acquire(state, job, pid, count, ids, ticket)
        if got is not None:
            return got
        time.sleep(POLL_S)


def release(state: Path, job: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (state / "gpus" / "held" / job).unlink()


def main(argv: list[str]) -> int:
    usage = "usage: gpu_slots acquire STATE JOB PID N ID,ID... TICKET | release STATE JOB"
    if len(argv) == 3 and argv[0] == "release":
        release(Path(argv[1]), argv[2])
        return 0
    numbers = argv[3:5] + argv[6:7]
    if len(argv) != 7 or argv[0] != "acquire" or not all(n.isdigit() for n in numbers):
        print(usage, file=sys.stderr)
        return 2
    state, job, pid, count = Path(argv[1]), argv[2], int(argv[3]), int(argv[4])
    ids = [i for i in argv[5].split(",") if i]
    if count > len(ids):
        print(
            f"hpcui: this job asks for {count} GPU(s) and this machine has {len(ids)}; "
            "it can never start. Ask for fewer GPUs.",
            file=sys.stderr,
        )
        return 2
    print(",".join(acquire(state, job, pid, count, ids, int(argv[6]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
