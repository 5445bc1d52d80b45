"""How far a cut-off submission got (real /bin/sh on real folders), and whose it is."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest

from hpcui.backends.states import JobState
from hpcui.store import remote as submission
from hpcui.store.registry import CHAIN_CUT, JobRecord, Registry, segment_index
from hpcui.submission.recovery import ORPHAN_S, abandoned, in_flight, submitter
from hpcui.transport.local import LocalTransport


def _verdicts(folders):
    res = LocalTransport().run(submission.reconcile_command([str(f) for f in folders]))
    assert res.ok, res.stderr
    return {k: (v.state, v.answer) for k, v in submission.parse_reconcile(res.stdout).items()}


def _claim(folder) -> subprocess.Popen:
    """A shell that claims `folder` the way a submit does and then stays (sbatch running)."""
    claim = submission.submit_claim().decode()
    return subprocess.Popen(["/bin/sh", "-c", f"cd '{folder}' && {claim} && exec sleep 30"])


def _wait_marker(folder) -> None:
    for _ in range(100):
        if (folder / ".submitting").exists() and (folder / ".submitting").read_text():
            return
        time.sleep(0.02)
    raise AssertionError("the claim never wrote its marker")


def test_each_stage_of_a_submission_is_told_apart(tmp_path):
    missing, answered, unclaimed, live, dead = (tmp_path / n for n in "a b c d e".split())
    for d in (answered, unclaimed, live, dead):
        d.mkdir()
    (answered / "job_id").write_text("4711;dev\n")
    (answered / ".submitting").write_text("1 gone\n")
    holder, quitter = _claim(live), _claim(dead)
    try:
        _wait_marker(live)
        _wait_marker(dead)
        quitter.kill()
        quitter.wait()
        got = _verdicts([missing, answered, unclaimed, live, dead])
    finally:
        holder.kill()
        holder.wait()
    assert got == {
        str(missing): ("NOFOLDER", ""),
        str(answered): ("ID", "4711;dev"),
        str(unclaimed): ("UNCLAIMED", ""),
        str(live): ("LIVE", ""),
        str(dead): ("DEAD", ""),
    }


def test_a_claim_from_another_login_node_goes_by_its_age(tmp_path):
    young, old = tmp_path / "young", tmp_path / "old dir"  # a space: the folder is last
    for d in (young, old):
        d.mkdir()
        (d / ".submitting").write_text("12345 some-other-login-node\n")
    past = time.time() - (submission.CLAIM_TTL_MIN + 1) * 60
    os.utime(old / ".submitting", (past, past))
    assert _verdicts([young, old]) == {str(young): ("LIVE", ""), str(old): ("DEAD", "")}


def test_parse_reconcile_ignores_noise():
    text = "motd line\nID 12 /a/b\nLIVE - /c d/e\nBOGUS x /f\n"
    got = submission.parse_reconcile(text)
    assert {k: v.state for k, v in got.items()} == {"/a/b": "ID", "/c d/e": "LIVE"}


def _rec(token: str, **meta) -> JobRecord:
    return JobRecord(cluster="c", token=token, folder=f"/x/{token}", meta=meta)


def test_a_submission_is_abandoned_only_when_its_maker_is_gone():
    me = submitter()
    assert me == {"pid": os.getpid(), "host": socket.gethostname()}
    assert abandoned(_rec("t1", submitter=me))  # ours, and no longer being made
    with in_flight("c", "t2"):
        assert not abandoned(_rec("t2", submitter=me))
    other = subprocess.Popen(["sleep", "30"])
    try:
        alive = {"pid": other.pid, "host": me["host"]}
        assert not abandoned(_rec("t3", submitter=alive))
        # an hour on, the pid may belong to anything: the submission is finished anyway
        assert abandoned(_rec("t3", submitter=alive), now=time.time() + ORPHAN_S + 1)
    finally:
        other.kill()
        other.wait()
    assert abandoned(_rec("t4", submitter={"pid": other.pid, "host": me["host"]}))
    elsewhere = {"pid": os.getpid(), "host": "another-laptop"}
    assert not abandoned(_rec("t5", submitter=elsewhere))
    assert abandoned(_rec("t5", submitter=elsewhere), now=time.time() + ORPHAN_S + 1)
    assert not abandoned(_rec("t6"))  # older records without a submitter: by age alone


def test_registry_lists_one_unfinished_record_per_submission(tmp_path):
    reg = Registry(tmp_path / "r.sqlite")
    reg.add([JobRecord(cluster="c", token="arr", array_index=i, folder="/f") for i in range(3)])
    reg.add([JobRecord(cluster="c", token="one", folder="/g")])
    reg.add([JobRecord(cluster="c", token="done", folder="/h")])
    reg.set_job_ids("c", "done", "7", is_array=False)
    assert [(r.token, r.array_index) for r in reg.unfinished_submissions("c")] == [
        ("arr", 0),
        ("one", -1),
    ]
    reg.mark_not_submitted("c", "arr", "NOT SUBMITTED (test)")
    assert {(r.state, r.state_raw) for r in reg.by_token("c", "arr")} == {
        (JobState.FAILED, "NOT SUBMITTED (test)")
    }
    assert [r.token for r in reg.unfinished_submissions("c")] == ["one"]


@pytest.mark.parametrize("answer", ["", "garbage"])
def test_an_answer_without_a_job_id_is_not_taken_for_one(tmp_path, answer):
    folder = tmp_path / "j"
    folder.mkdir()
    (folder / "job_id").write_text(answer)
    state, _ = _verdicts([folder])[str(folder)]
    assert state == ("UNCLAIMED" if not answer else "ID")  # an empty file is no answer


def _chain_records(token: str, folder: str, n: int) -> list[JobRecord]:
    return [
        JobRecord(cluster="c", token=token, array_index=segment_index(k), folder=folder,
                  meta={"chain": [k, n]})
        for k in range(n)
    ]  # fmt: skip


def test_a_cut_off_chain_gets_every_segments_id_from_its_answer(tmp_path):
    """The chain's submit printed one id per segment into job_id: after a drop, every
    segment gets its own (recovery reads all the lines, not the first)."""
    from hpcui.schedulers.slurm import SlurmScheduler
    from hpcui.submission.recovery import finish_cut_off

    folder = tmp_path / "chain"
    folder.mkdir()
    (folder / "job_id").write_text("501;dev\n502;dev\n503;dev\n")
    reg = Registry(tmp_path / "r.sqlite")
    reg.add(_chain_records("ch", str(folder), 3))
    assert [r.array_index for r in reg.unfinished_submissions("c")] == [-1]  # one per chain
    tracked: list[str] = []
    found = finish_cut_off(
        "c", reg, LocalTransport(), SlurmScheduler(LocalTransport()), tracked.extend,
        tokens=["ch"],
    )  # fmt: skip
    assert found.ids == {"ch": ["501", "502", "503"]}
    segs = sorted(reg.by_token("c", "ch"), key=lambda r: r.meta["chain"][0])
    assert [(r.job_id, r.state) for r in segs] == [
        (i, JobState.PENDING) for i in ("501", "502", "503")
    ]
    assert sorted(tracked) == ["501", "502", "503"]


def test_a_chain_known_only_by_its_token_keeps_its_unsubmitted_segments_visible(tmp_path):
    reg = Registry(tmp_path / "r.sqlite")
    reg.add(_chain_records("ch", "/f", 3))
    reg.set_chain_ids("c", "ch", ["601"])  # the shell died after the first sbatch
    segs = sorted(reg.by_token("c", "ch"), key=lambda r: r.meta["chain"][0])
    assert [(r.job_id, r.state) for r in segs] == [
        ("601", JobState.PENDING), (None, JobState.FAILED), (None, JobState.FAILED)
    ]  # fmt: skip
    assert segs[1].state_raw == CHAIN_CUT
