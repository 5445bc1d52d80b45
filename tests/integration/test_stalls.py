"""Half-open links: the sshd serving a connection is frozen (SIGSTOP), as a laptop asleep,
a lost VPN or a black-holed route look from the client: TCP stays up, nothing answers.

Every call must end in its own time, the stall must be found by keepalives that expect a
reply (and the dead link closed), and the faces must say "stalled", not "connected".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import CommandTimeout, ConnectionLost, HpcuiError, JobTimeoutError
from hpcui.transport import deadline
from hpcui.transport.ssh.session import SshTransport
from tests.conftest import DEVCLUSTER, session_sshd_pids

pytestmark = pytest.mark.devcluster

FROZEN_AT_MOST_S = 60.0  # a failing test still thaws the sshd


def add(a, b):
    return a + b


def nap(seconds):
    import time as _t

    print("napping", flush=True)
    _t.sleep(seconds)


@contextlib.contextmanager
def frozen(pids: list[int]) -> Iterator[None]:
    def thaw() -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    safety = threading.Timer(FROZEN_AT_MOST_S, thaw)
    safety.start()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        safety.cancel()
        thaw()


def _until(cond, seconds: float, what: str) -> float:
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def _transport(**kw) -> SshTransport:
    return SshTransport.from_config(
        "hpcui-dev", ssh_config=str(DEVCLUSTER / "ssh" / "config"), login_shell=False, **kw
    )


def test_keepalives_find_a_frozen_link_close_it_and_the_next_call_reconnects(devcluster):
    t = _transport(alive_interval=0.5, alive_count_max=3)
    heard: list[float | None] = []
    t.watch_stall(heard.append)
    try:
        pids = session_sshd_pids(t.run)
        with frozen(pids):
            _until(lambda: t.stalled_s() > 0, 5, "the stall to be noticed")
            assert heard and heard[0] == 0.5
            _until(lambda: t._conn is None, 5, "the dead link to be closed")
            assert t.stalled_s() >= 1.5  # three intervals without an answer
            # the frozen session stays frozen: the next call gets a new connection
            assert t.run("echo back").stdout.strip() == "back"
            assert t.connects == 2 and t.stalled_s() == 0 and heard[-1] is None
    finally:
        t.close()


def test_a_command_blocked_on_a_frozen_link_ends_with_connection_lost(devcluster):
    t = _transport(alive_interval=0.5, alive_count_max=3)
    try:
        pids = session_sshd_pids(t.run)
        box: dict = {}

        def call() -> None:
            started = time.monotonic()
            try:
                t.run("sleep 5; echo late")
            except HpcuiError as exc:
                box["error"] = exc
            box["took"] = time.monotonic() - started

        with frozen(pids):
            worker = threading.Thread(target=call)
            worker.start()
            worker.join(timeout=20)
        assert not worker.is_alive()
        assert isinstance(box.get("error"), ConnectionLost), box
        assert box["took"] < 5  # found by the keepalives (~2 s), not by the command ending
    finally:
        t.close()


def test_an_sftp_read_on_a_frozen_link_keeps_the_callers_deadline(devcluster):
    t = _transport(alive_interval=0)  # no watchdog: the deadline alone must end it
    try:
        t.write_file("/tmp/hpcui-stall-probe", b"x" * 1000)
        pids = session_sshd_pids(t.run)
        with frozen(pids):
            started = time.monotonic()
            with pytest.raises(CommandTimeout, match="No answer"), deadline.within(2.0):
                t.read_file("/tmp/hpcui-stall-probe")
            took = time.monotonic() - started
        assert 1.5 < took < 4
        assert t.read_file("/tmp/hpcui-stall-probe") == b"x" * 1000  # a new SFTP session
    finally:
        t.close()


@pytest.fixture
def watched_dev(dev_env):
    """A fresh dev Cluster whose keepalives run every second and never give up (the
    stall stays a stall for the whole test)."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cluster = Cluster(load_config().cluster("dev"))
    cluster.transport.alive_interval, cluster.transport.alive_count_max = 1.0, 1000
    yield cluster
    cluster.close()


def test_result_with_a_timeout_returns_in_time_during_a_stall(watched_dev):
    job = watched_dev.submit(add, 1, 2)
    assert job.wait(timeout=120) is JobState.COMPLETED  # ended; its result not fetched yet
    with frozen(session_sshd_pids(watched_dev.run)):
        started = time.monotonic()
        with pytest.raises(CommandTimeout, match="not answered"):
            job.result(timeout=4)
        took = time.monotonic() - started
    assert took < 7  # was 74 s: the read waited for the whole stall


def test_wait_during_a_stall_says_the_state_is_old(watched_dev):
    job = watched_dev.submit(nap, 60, time="5m")
    try:
        _until(lambda: job.state is JobState.RUNNING, 90, "the job to run")
        with frozen(session_sshd_pids(watched_dev.run)):
            _until(lambda: watched_dev.transport.stalled_s() > 0, 5, "the stall")
            started = time.monotonic()
            with pytest.raises(JobTimeoutError) as err:
                job.wait(timeout=3)
            took = time.monotonic() - started
            with pytest.raises(HpcuiError):  # logs(timeout=) too: was 59 s
                list(watched_dev.logs(job, follow=True, timeout=3))
            logs_took = time.monotonic() - started - took
    finally:
        job.cancel()
    assert "could not be checked" in str(err.value) and "Last known state: RUNNING" in str(
        err.value
    )
    assert took < 5 and logs_took < 6


def test_the_app_header_says_stalled_and_then_connected_again(dev_env, monkeypatch):
    import hpcui.transport.ssh.session as ssh
    from hpcui.tui.app import HpcuiApp

    monkeypatch.setattr(ssh, "ALIVE_INTERVAL_S", 0.5)
    monkeypatch.setattr(ssh, "ALIVE_COUNT_MAX", 1000)

    async def go() -> tuple[str, str]:
        app = HpcuiApp("dev", connect=["dev"])
        async with app.run_test(size=(160, 45)) as pilot:

            async def until(cond, what: str) -> None:
                for _ in range(200):
                    if cond():
                        return
                    await pilot.pause(0.1)
                raise AssertionError(f"{what}: {app.sub_title!r}")

            await until(lambda: app.hub.conns["dev"].status == "connected", "connected")
            cluster = app.hub.cluster("dev")
            pids = session_sshd_pids(cluster.run)
            with frozen(pids):
                await until(lambda: "stalled" in app.sub_title, "stalled")
                stalled = app.sub_title
            await until(lambda: app.hub.conns["dev"].status == "connected", "connected again")
            return stalled, app.sub_title

    stalled, after = asyncio.run(go())
    assert "dev stalled" in stalled and "no answer" in stalled
    assert "stalled" not in after and "dev" in after
