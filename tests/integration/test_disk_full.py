"""A full disk or quota under remote_base (a real 1 MiB tmpfs on the dev cluster,
/srv/hpcui-devcluster-tiny): a clear error that names the cause and the free space, no
partial file left to break a later submit, no job lost or doubled, and the next submit
works once there is room again.

Before: SFTP's pipelined writes hid the error, so a truncated runtime bundle was
installed under its final name (every later job failed to import hpcui), and a failed
unpack read "rejected the job ... fix partition/qos".
"""

from __future__ import annotations

import time

import pytest

from hpcui.errors import JobLostError, RemoteWriteError

pytestmark = [pytest.mark.devcluster, pytest.mark.xdist_group("tiny")]  # one filesystem

TINY = "/srv/hpcui-devcluster-tiny"


def add(a, b):
    return len(a) + len(b) if isinstance(a, bytes) else a + b


@pytest.fixture
def tiny(dev_env):
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster("dev").model_copy(update={"remote_base": f"{TINY}/base"})
    with Cluster(cfg) as c:
        c.run(["sh", "-c", f"rm -rf {TINY}/* {TINY}/.[!.]*"]).check("emptying")
        yield c
        c.run(["sh", "-c", f"rm -rf {TINY}/* {TINY}/.[!.]*"])


def _free(c) -> int:
    return int(c.run(["df", "-Pk", TINY]).check("df").stdout.splitlines()[-1].split()[3]) * 1024


def fill(c, leave: int) -> None:
    """Take all but `leave` bytes of the tiny filesystem.

    The previous test's last job may still be exiting when its result is read: its
    interpreter holds the (already removed) runtime bundle open, so its space comes back
    a moment later. Wait for that, a bounded number of looks."""
    free = _free(c)
    for _ in range(20):
        if free > leave:
            break
        time.sleep(0.5)
        free = _free(c)
    assert free > leave, (free, leave)
    c.run(["sh", "-c", f"head -c {free - leave} /dev/zero > {TINY}/filler"]).check("fill")


def files(c, sub: str) -> list[str]:
    return c.run(["sh", "-c", f"ls -A {TINY}/base/{sub} 2>/dev/null"]).stdout.split()


def test_a_bundle_that_does_not_fit_leaves_nothing_behind(tiny):
    fill(tiny, 100_000)  # room for folders and a pickle, not for the ~290 kB runtime bundle
    with pytest.raises(RemoteWriteError, match="disk or quota there is most likely full") as err:
        tiny.submit(add, 1, 2, time="5m")
    assert "bytes free there (df)" in str(err.value) and "/runtime/" in str(err.value)
    assert files(tiny, "runtime") == []  # no truncated bundle, no .part
    assert tiny.registry.list(tiny.name) == []  # nothing recorded as submitted
    tiny.run(["rm", f"{TINY}/filler"]).check("rm")
    assert tiny.submit(add, 1, 2, time="5m").result(timeout=120) == 3  # the bundle is whole


def test_pickles_that_do_not_fit_are_not_submitted_and_leave_no_folder(tiny):
    assert tiny.submit(add, 0, 0, time="5m").result(timeout=120) == 0  # bundle installed
    before = files(tiny, "jobs")
    fill(tiny, 40_000)
    big = b"x" * 200_000
    with pytest.raises(RemoteWriteError, match="most likely full"):
        tiny.submit(add, big, b"", time="5m")  # one pickle: written directly
    with pytest.raises(RemoteWriteError, match="full"):
        tiny.map(add, [big[:20_000]] * 6, [b""] * 6, time="5m")  # one calls pack
    assert files(tiny, "jobs") == before  # no partial job folder
    assert [r.state.value for r in tiny.registry.list(tiny.name)] == ["COMPLETED"]
    tiny.run(["rm", f"{TINY}/filler"]).check("rm")
    jobs = tiny.map(add, [big[:5_000]] * 6, [b""] * 6, time="5m")  # fits with the bundle
    assert [j.result(timeout=120) for j in jobs] == [5_000] * 6


def big_result(n):
    return b"r" * n


def test_a_result_that_does_not_fit_is_named_as_such(tiny):
    assert tiny.submit(add, 0, 0, time="5m").result(timeout=120) == 0  # bundle installed
    fill(tiny, 120_000)
    job = tiny.submit(big_result, 400_000, time="5m")
    with pytest.raises(JobLostError) as err:
        job.result(timeout=120)
    assert "could not write its result" in str(err.value), err.value
