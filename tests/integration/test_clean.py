"""`hpcui clean` on the dev cluster: ended jobs whose results were fetched go, a running
job and an unfetched result stay (until --older-than), a dry run removes nothing, and a
fetched result stays readable from this machine's copy."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from hpcui.backends.states import JobState
from hpcui.cli import main
from hpcui.errors import JobLostError
from tests.support.jobs import wait_job_state

pytestmark = pytest.mark.devcluster


def add(a, b):
    return a + b


def nap(seconds):
    import time as _t

    _t.sleep(seconds)


def _exists(cluster, folder: str) -> bool:
    return cluster.run(["test", "-d", folder]).ok


def test_clean_keeps_what_is_running_or_unfetched_and_fetched_results_stay_readable(dev, capsys):
    fetched = dev.submit(add, 1, 2, name="clean-fetched")
    assert fetched.result(timeout=120) == 3  # fetched: a checked copy is kept locally
    unfetched = dev.submit(add, 3, 4, name="clean-unfetched")
    running = dev.submit(nap, 120, name="clean-running", time="5m")
    try:
        assert unfetched.wait(timeout=120) is JobState.COMPLETED
        wait_job_state(running, {JobState.RUNNING}, 60)
        assert main(["clean", "-c", "dev", "--dry-run", "--json"]) == 0
        dry = json.loads(capsys.readouterr().out)
        assert dry["dry_run"] and [f["folder"] for f in dry["removed"]] == [fetched.folder]
        assert _exists(dev, fetched.folder)  # a dry run removes nothing

        report = dev.clean()
        assert [f.folder for f in report.removed] == [fetched.folder]
        assert report.files >= 5 and report.bytes > 0  # script, key, pickle, logs, result...
        assert (report.kept_active, report.kept_unfetched) == (1, 1)
        assert not _exists(dev, fetched.folder)
        assert _exists(dev, unfetched.folder) and _exists(dev, running.folder)
        assert dev.get_job(fetched.job_id).result() == 3  # from this machine's copy

        time.sleep(1.1)
        old = dev.clean(older_than=timedelta(seconds=1))  # policy: unfetched ones go too
        assert [f.folder for f in old.removed] == [unfetched.folder]
        assert _exists(dev, running.folder) and old.kept_active == 1
        with pytest.raises(JobLostError, match="removed by `hpcui clean`"):
            dev.get_job(unfetched.job_id).result()
    finally:
        running.cancel()


def test_the_keep_policy_cleans_old_ended_jobs_after_a_submit_at_most_once_a_day(dev_env):
    import os

    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    dev = Cluster(load_config().cluster("dev").model_copy(update={"keep": "1s"}))
    try:
        old = dev.submit(add, 1, 2, name="keep-old")  # its own submit ran the day's clean
        assert old.wait(timeout=120) is JobState.COMPLETED  # ended, result never fetched
        first = dev._auto_clean_thread
        assert first is not None
        first.join(timeout=60)
        stamp = dev.registry.path.parent / "housekeeping" / "dev.last"
        day_ago = time.time() - 2 * 86400
        os.utime(stamp, (day_ago, day_ago))  # a day later
        time.sleep(1.1)
        new = dev.submit(add, 3, 4, name="keep-new")
        second = dev._auto_clean_thread
        assert second is not first
        second.join(timeout=60)
        assert not _exists(dev, old.folder) and _exists(dev, new.folder)
        dev.submit(add, 5, 6, name="keep-third")  # the same day: no second clean
        assert dev._auto_clean_thread is second
    finally:
        dev.close()


def test_a_map_leaves_four_files_per_element(dev, capsys):
    """A 20-element map's folder: its calls in one pack, then per element only what the
    element itself writes (its call, stdout, stderr, the signed result). Before: one
    pickle and one link per element uploaded and a signature file beside each result."""
    jobs = dev.map(add, list(range(20)), [1] * 20, time="5m")
    assert [j.result(timeout=300) for j in jobs] == [i + 1 for i in range(20)]
    folder = jobs[0].paths.folder
    names = dev.run(["ls", "-A", folder]).check("ls").stdout.split()
    array = jobs[0].job_id.split("_")[0]
    per = {i: [n for n in names if n.startswith(f"{array}_{i}_")] for i in range(20)}
    assert all(len(files) == 4 for files in per.values()), per
    shared = set(names) - {n for files in per.values() for n in files}
    needed = {".hpcui-result-key", "calls.pack", "job_id", "submission.sh"}
    assert needed <= shared <= needed | {".submitting"}, shared  # the guard's marker
    with capsys.disabled():
        print(f"\nfiles of a 20-element map: {len(names)} (4 per element + {len(shared)})")


def test_clean_frees_fire_and_forget_jobs_the_registry_still_calls_pending(dev_env):
    """`hpcui submit` without --wait: no process heard the jobs end, so the registry says
    PENDING. Before: clean kept them ("kept 2 with pending or running jobs") forever."""
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    cfg = load_config().cluster("dev")
    with Cluster(cfg) as submitter:  # closed at once: nobody follows them, as after a CLI submit
        jobs = [submitter.submit(add, i, 1, name="fire-and-forget") for i in range(2)]
    ids = {j.job_id for j in jobs}
    with Cluster(cfg) as later:
        for _ in range(600):  # the scheduler's own word, not hpcui's status service
            out = later.run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "State"])
            if out.stdout.split() == ["COMPLETED", "COMPLETED"]:
                break
            time.sleep(0.2)

        def registry_states() -> set[JobState]:
            return {r.state for r in later.registry.list("dev") if r.job_id in ids}

        assert not any(s.is_final for s in registry_states())  # what clean used to trust
        report = later.clean(older_than=timedelta(0))
        assert sorted(f.folder for f in report.removed) == sorted(j.folder for j in jobs)
        assert report.kept_active == 0
        assert registry_states() == {JobState.COMPLETED}  # and the registry learned it


def test_a_job_that_left_no_result_keeps_its_folder_until_the_policy(dev, capsys):
    """A TIMEOUT job never wrote a result: `clean --dry-run` counted it as fetched and
    would have removed its logs, all that says what happened (issue 49, defect 12)."""
    timed_out = dev.submit(nap, 300, name="clean-timeout", time="1m")
    assert timed_out.wait(timeout=240) in (JobState.TIMEOUT, JobState.FAILED)
    assert main(["clean", "-c", "dev", "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert timed_out.folder not in [f["folder"] for f in dry["removed"]]
    assert dry["kept_no_result"] >= 1
    assert main(["clean", "-c", "dev", "--dry-run"]) == 0
    assert "left no result (their logs say why" in capsys.readouterr().err
    report = dev.clean()
    assert _exists(dev, timed_out.folder) and report.kept_no_result >= 1
    time.sleep(1.1)
    old = dev.clean(older_than=timedelta(seconds=1))  # asked: it goes
    assert timed_out.folder in [f.folder for f in old.removed]
