"""Calls during a stalled link: how long each takes, beside a call with no deadline.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.stall_bench

The sshd processes serving the client's connection are frozen (SIGSTOP), as a laptop
asleep or a black-holed route look from the client: TCP stays up, nothing answers. The
reference, in the same run, is a bare paramiko SFTP read on the same frozen link with no
deadline: it blocks until the stall ends (the bench thaws after REFERENCE_CAP_S).
Run on the dev cluster's machine (it signals the local sshd processes).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

from benchmarks import sized
from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.config import load_config
from hpcui.errors import HpcuiError

REFERENCE_CAP_S = sized(30.0, 4.0)
#: what each call during the stall may take (result, wait, logs)
BUDGET_S = sized((10, 10, 15), (2, 2, 3))


def add(a, b):
    return a + b


def nap(seconds):
    import time as _t

    print("napping", flush=True)
    _t.sleep(seconds)


def _session_pids(cluster: Cluster) -> list[int]:
    session = int(cluster.run("echo $PPID").stdout.strip())
    above = int(cluster.run("ps -o ppid= -p $PPID").stdout.strip() or 0)
    return [p for p in {session, above} if p > 1]


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _timed(call: Callable[[], object]) -> tuple[float, str]:
    start = time.monotonic()
    try:
        call()
        outcome = "returned"
    except HpcuiError as exc:
        outcome = f"{type(exc).__name__}"
    return time.monotonic() - start, outcome


def main() -> None:
    dev = Cluster(load_config().cluster("dev"))
    # --quick: keepalives every 0.5 s, so the short stall is noticed within it
    dev.transport.alive_interval = sized(dev.transport.alive_interval, 0.5)
    done = dev.submit(add, 1, 2)
    assert done.result(timeout=120) == 3
    running = dev.submit(nap, 120, time="5m")
    while running.state is not JobState.RUNNING:
        time.sleep(0.2)
    # the reference: its own connection, no keepalives, no deadline on its SFTP session
    bare = Cluster(load_config().cluster("dev"))
    bare.transport.alive_interval = 0
    bare_pids = _session_pids(bare)
    sftp = bare.transport.sftp()
    sftp.get_channel().settimeout(None)
    pids = _session_pids(dev)
    noticed: dict[str, float] = {}
    frozen_at = time.monotonic()
    dev.transport.watch_stall(
        lambda s: noticed.setdefault("stalled", time.monotonic() - frozen_at) if s else None
    )
    _signal(pids + bare_pids, signal.SIGSTOP)
    thaw = threading.Timer(REFERENCE_CAP_S, lambda: _signal(bare_pids, signal.SIGCONT))
    thaw.start()
    box: dict[str, tuple[float, str]] = {}
    reference = threading.Thread(target=lambda: box.update(ref=_timed(lambda: sftp.stat("/tmp"))))
    reference.start()
    try:
        rows = [
            ("result(timeout=10) of a finished job", "74 s (issue 22)", _timed(lambda: done.result(timeout=BUDGET_S[0]))),
            ("wait(timeout=10) of a running job", "stale state as current", _timed(lambda: running.wait(timeout=BUDGET_S[1]))),
            ("logs(follow, timeout=15)", "59 s (issue 22)", _timed(lambda: list(dev.logs(running, follow=True, timeout=BUDGET_S[2])))),
        ]  # fmt: skip
        reference.join()
        ref = box["ref"]
    finally:
        thaw.cancel()
        _signal(pids + bare_pids, signal.SIGCONT)
        running.cancel()
        bare.close()
    print(f"{'call during a stall':42} {'took':>8}  {'outcome':22} reference")
    for what, before, (took, outcome) in rows:
        print(f"{what:42} {took:7.1f}s  {outcome:22} before: {before}")
    print(
        f"{'bare SFTP stat, no deadline (same run)':42} {ref[0]:7.1f}s  {ref[1]:22} "
        f"blocked until the stall ended (thawed at {REFERENCE_CAP_S:.0f} s)"
    )
    interval, count = dev.transport.alive_interval, dev.transport.alive_count_max
    print(
        f"stall noticed after {noticed.get('stalled', float('nan')):.1f} s "
        f"(keepalive every {interval:.0f} s, dead after {count} unanswered)"
    )
    dev.close()


if __name__ == "__main__":
    main()
