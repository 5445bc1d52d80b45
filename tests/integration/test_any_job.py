"""Any job of the user on both dev sites: a plain sbatch job's logs followed, hold / release
/ time limit / requeue, edit-and-resubmit, afterok dependencies, free GPUs and fair share.

Other tests share the cluster: every assertion is about jobs these tests submitted, and
free-capacity checks are about the node their own job holds."""

from __future__ import annotations

import time

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import UsageError
from tests.integration.test_cli import hpcui, ok_json, work  # noqa: F401 (fixture)

pytestmark = pytest.mark.devcluster

PLAIN = """#!/bin/bash
#SBATCH --job-name=plain-{tag}
#SBATCH --output=logs-%x/out-%j.txt
#SBATCH --error=logs-%x/err-%j.txt
#SBATCH --time=2
for i in 1 2 3 4 5; do echo "line $i"; sleep 1; done
echo "on stderr" >&2
"""


def sbatch_script(cluster, script: str, *args: str) -> str:
    """Submit a job as a user would with sbatch in ~ (not through hpcui)."""
    # every log folder the scripts name: Slurm does not create one, and a job whose output
    # it cannot open fails at launch (JobLaunchFailure, exit code 0:53, empty stderr)
    cluster.run(
        "mkdir -p ~/anyjob && cd ~/anyjob && mkdir -p logs-plain-a logs-plain-b logs-plain-c logs-plain-w"
    )
    # a short limit unless the test names one: a job with the partition's 2 hours (or even
    # 5 minutes) does not backfill past another test's pending multi-node job and waits
    # for it to start and end (CI saw a plain job pending over 120 s)
    named = any(a.startswith(("--time", "-t")) for a in args) or "#SBATCH --time" in script
    limit = () if named else ("--time=2",)
    res = cluster.transport.run(
        f"cd ~/anyjob && sbatch --parsable {' '.join((*limit, *args))}", stdin=script.encode()
    ).check("sbatch")
    return res.stdout.strip().split(";")[0]


def wait_state(cluster, job_id: str, want: set[JobState], timeout: float = 90) -> JobState:
    """Until the job is in one of `want`; a job that reaches another final state fails the
    wait at once, with what the scheduler said of it (it will not change any more)."""
    deadline = time.monotonic() + timeout
    while True:
        d = cluster.control.details(job_id)
        if d.state in want:
            return d.state
        assert not d.state.is_final, (
            f"job {job_id} ended {d.state_raw} (reason {d.reason or '-'}, exit code "
            f"{d.exit_code or '-'}, stdout {d.stdout}), wanted {want}"
        )
        assert time.monotonic() < deadline, f"job {job_id} still {d.state}, wanted {want}"
        time.sleep(0.5)


def test_a_plain_sbatch_jobs_logs_are_followed_from_its_own_paths(site):
    job_id = sbatch_script(site, PLAIN.format(tag="a"))
    details = site.control.details(job_id)
    home = site.transport.home()
    # %x and %j expanded, relative to the working directory
    assert details.stdout == f"{home}/anyjob/logs-plain-a/out-{job_id}.txt"
    assert details.stderr == f"{home}/anyjob/logs-plain-a/err-{job_id}.txt"
    assert details.work_dir == f"{home}/anyjob" and details.name == "plain-a"
    text, readers = "", ""
    for chunk in site.logs(job_id, follow=True, timeout=120):
        if not readers:  # pushed like hpcui's own logs: a `tail -F` on the login node
            name = details.stdout.rsplit("/", 1)[1]  # tail is given the path with a mark
            readers = site.run(f"pgrep -f '[t]ail .* -F -- .*/{name}' || true").stdout.strip()
        text += chunk.text
    assert readers, "the log was polled, not pushed"
    assert [line for line in text.splitlines() if line] == [f"line {i}" for i in range(1, 6)]
    err = "".join(c.text for c in site.logs(job_id, "stderr"))
    assert err == "on stderr\n"
    with pytest.raises(UsageError, match="no ranks"):
        site.logs(job_id, rank=1)


def test_a_job_id_walks_to_the_scheduler_and_back_through_one_handle(site, monkeypatch):
    """Issue 37: `hpcui logs 4242` for a plain job: `Cluster.job` asks the scheduler once
    and hands back an `OtherJob`; following its log (to the end) goes through that handle
    alone: the Cluster's own job methods are gone meanwhile, and the scheduler is asked
    only whether the job ended."""
    from hpcui.jobs.other import OtherJob

    job_id = sbatch_script(site, PLAIN.format(tag="w"))
    before = site.scheduler.calls
    handle = site.job(job_id)
    assert isinstance(handle, OtherJob) and handle.job_id == job_id
    assert site.scheduler.calls == before + 1  # one scontrol for the id

    def gone(*_a, **_k):
        raise AssertionError("the walk went back through the Cluster")

    for name in ("job", "_record", "get_job", "logs", "view"):
        monkeypatch.setattr(site, name, gone)
    for name in ("details", "batch_script"):
        monkeypatch.setattr(site.control, name, gone)
    text = "".join(c.text for c in handle.logs(follow=True, timeout=120))
    assert [line for line in text.splitlines() if line] == [f"line {i}" for i in range(1, 6)]
    asked = site.scheduler.calls - before - 1
    assert 0 < asked <= 10  # "has it ended?" every STATE_POLL_S (5 s), no other question
    monkeypatch.undo()
    assert isinstance(site.job(job_id), OtherJob)
    wait_state(site, job_id, {JobState.COMPLETED})


FIXED = """#!/bin/bash
#SBATCH --job-name=fixed
#SBATCH --output=logs-fixed/train.log
#SBATCH --time=4
for i in 1 2 3; do echo "line $i"; sleep 0.5; done
"""


def test_a_pending_jobs_old_log_file_is_not_its_log(site):
    """A fixed `-o train.log` holds the previous job's log until Slurm truncates it at the
    start: a pending job's log is empty, and following it waits for the start (it showed
    the old lines first, then the new ones)."""
    import threading

    site.run(
        "mkdir -p ~/anyjob/logs-fixed && printf 'stale: an older job\\n' > ~/anyjob/logs-fixed/train.log"
    )
    job_id = sbatch_script(site, FIXED, "--hold")
    try:
        assert list(site.logs(job_id)) == []  # pending: the file is not this job's yet
        threading.Timer(2.0, site.control.release, args=([job_id],)).start()
        text = "".join(c.text for c in site.logs(job_id, follow=True, timeout=120))
        assert text == "line 1\nline 2\nline 3\n"
    finally:
        site.control.cancel([job_id])


def test_hold_update_release_a_pending_job_then_requeue_it_running(site):
    job_id = sbatch_script(site, PLAIN.format(tag="b"), "--hold")
    try:
        d = site.control.details(job_id)
        assert d.state is JobState.PENDING and d.reason == "JobHeldUser"
        site.control.release([job_id])
        site.control.hold([job_id])
        assert site.control.details(job_id).reason == "JobHeldUser"
        site.control.set_time_limit(job_id, "1m")
        assert site.control.details(job_id).time_limit_s == 60
        with pytest.raises(UsageError, match="Not a time limit"):
            site.control.set_time_limit(job_id, "soon")
        site.control.release([job_id])
        wait_state(site, job_id, {JobState.RUNNING, JobState.COMPLETED})
        site.control.requeue([job_id])
        # back in the queue (a requeued job waits its BeginTime, then runs again)
        wait_state(site, job_id, {JobState.PENDING, JobState.REQUEUED})
    finally:
        site.control.cancel([job_id])
    with pytest.raises(UsageError, match="does not know job"):
        site.control.hold(["99999999"])
    with pytest.raises(UsageError, match="not a Slurm job id"):
        site.control.hold(["1;touch /tmp/x"])


def test_edit_and_resubmit_a_jobs_own_script(site):
    job_id = sbatch_script(site, PLAIN.format(tag="a"), "--hold")
    try:
        script = site.control.batch_script(job_id)
        assert script.startswith("#!/bin/bash") and "line $i" in script
        edited = script.replace('echo "line $i"', 'echo "edited $i"')
        new_id = site.control.resubmit(
            edited, work_dir=site.control.details(job_id).work_dir, name="plain"
        )
        assert new_id != job_id
        text = "".join(c.text for c in site.logs(new_id, follow=True, timeout=120))
        assert "edited 5" in text and "line 1" not in text
        with pytest.raises(UsageError, match="interpreter line"):
            site.control.resubmit("echo no shebang\n", work_dir="/tmp")
        with pytest.raises(UsageError, match="refused the edited script"):
            site.control.resubmit("#!/bin/bash\n#SBATCH --partition=nope\ntrue\n", work_dir="/tmp")
    finally:
        site.control.cancel([job_id])


QUICK = """#!/bin/bash
#SBATCH --job-name=plain-c
#SBATCH --output=logs-%x/out-%j-%u.txt
#SBATCH --time=4
echo "quick out"
"""


def test_a_job_the_controller_forgot_is_described_from_accounting(site):
    """Once scontrol forgets an ended job (MinJobAge), job_details and batch_script fall
    back on the accounting database: Slurm 23.02+ keeps the log paths (sacct's StdOut,
    unexpanded: hpcui expands it) and `AccountingStoreFlags=job_script` the script. Here
    the job is still remembered, so both sources are compared on the same job; 22.05's
    sacct has no StdOut field: no record, and scontrol's message stands."""
    from hpcui.backends.slurm import control as slurm_control

    job_id = sbatch_script(site, QUICK)
    wait_state(site, job_id, {JobState.COMPLETED}, timeout=120)
    live = site.control.details(job_id)
    kept = site.scheduler.accounted_details(job_id)
    deadline = time.monotonic() + 30
    while kept is not None and not kept.state.is_final:  # the end reaches slurmdbd soon
        assert time.monotonic() < deadline, kept
        time.sleep(0.5)
        kept = site.scheduler.accounted_details(job_id)
    if site.name == "dev24":
        assert kept is not None
        assert (
            kept.stdout == live.stdout == f"{live.work_dir}/logs-plain-c/out-{job_id}-hpcuser.txt"
        )
        same = ("job_id", "name", "user", "state", "work_dir", "stderr", "nodelist",
                "batch_host", "time_limit_s", "partition", "submit_time", "start_time")  # fmt: skip
        assert {k: getattr(kept, k) for k in same} == {k: getattr(live, k) for k in same}
    else:  # Slurm 22.05: sacct refuses StdOut
        assert kept is None
    script, deadline = "", time.monotonic() + 30
    while not script:  # slurmdbd stores the script a little after the job is listed
        assert time.monotonic() < deadline, "the database never kept the batch script"
        cmd = slurm_control.batch_script_accounting_command(job_id)
        script = slurm_control.parse_batch_script_accounting(site.transport.run(cmd).stdout)
        time.sleep(0 if script else 0.5)
    assert script.rstrip("\n") == QUICK.rstrip("\n")  # 22.05 adds an empty line


def add(a, b):
    return a + b


def test_after_ok_waits_for_the_first_job(site):
    first = sbatch_script(site, PLAIN.format(tag="a"), "--hold")
    try:
        second = site.submit(add, 1, 2, time="5m", after_ok=[first])
        d = site.control.details(second.job_id)
        assert f"afterok:{first}" in d.dependency and d.reason == "Dependency"
        site.control.release([first])
        assert second.result(timeout=180) == 3
    finally:
        site.control.cancel([first])


def test_free_gpus_drop_on_the_node_a_two_gpu_job_holds(site):
    job_id = sbatch_script(
        site, "#!/bin/bash\nsleep 60\n", "--partition=gpu", "--gres=gpu:2", "--time=3"
    )
    try:
        wait_state(site, job_id, {JobState.RUNNING})
        node = site.control.details(job_id).batch_host
        report = site.site.free()
        rows = [n for n in report.nodes if n.node == node and n.partition == "gpu"]
        assert len(rows) == 1 and rows[0].gpus_total == 4
        assert rows[0].gpus_used >= 2 and rows[0].gpus_free <= 2
        assert rows[0].state in ("mixed", "allocated", "completing")  # another job ending
        gpu = next(p for p in report.partitions if p.partition == "gpu")
        nodes = [n for n in report.nodes if n.partition == "gpu"]
        assert gpu.gpus_free == sum(n.gpus_free for n in nodes)
        assert gpu.nodes_total == len(nodes)
    finally:
        site.control.cancel([job_id])


def test_fair_share_and_a_pending_jobs_priority(site):
    blocker = sbatch_script(site, "#!/bin/bash\nsleep 30\n", "--nodes=2", "--exclusive", "--time=2")
    waiting = sbatch_script(site, "#!/bin/bash\ntrue\n", "--nodes=2", "--exclusive", "--time=2")
    try:
        deadline = time.monotonic() + 30
        while True:
            st = site.site.standing()
            if any(p.job_id == waiting for p in st.pending) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert st.note == ""
        mine = [f for f in st.fair_share if f.user == "hpcuser"]
        main = [f for f in mine if f.account == "hpcacct"]  # hpcgrant too: the budget's account
        assert main and 0 <= main[0].fair_share <= 1
        row = next(p for p in st.pending if p.job_id == waiting)
        assert row.priority and row.priority > 0 and row.fair_share is not None
        assert st.allocation is None  # the dev profile names no allocation tool
    finally:
        site.control.cancel([blocker, waiting])


def test_cli_show_logs_hold_release_update_free_budget(work):  # noqa: F811
    res = hpcui(work, "exec", "--", "sh", "-c", "mkdir -p ~/anyjob")
    script = PLAIN.format(tag="b").replace("logs-%x/", "")
    res = hpcui(
        work,
        "exec",
        "--",
        "sh",
        "-c",
        f"cd ~/anyjob && printf '%s' '{script}' | sbatch --parsable --hold --time=2",
    )
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    shown = ok_json(hpcui(work, "show", job_id, "--json"))
    assert shown["hpcui_job"] is False and shown["details"]["reason"] == "JobHeldUser"
    assert shown["details"]["stdout"].endswith(f"/anyjob/out-{job_id}.txt")
    assert "not submitted by hpcui" in hpcui(work, "show", job_id).stdout
    held = hpcui(work, "logs", job_id)  # pending: nothing read, and it says why
    assert held.returncode == 0 and held.stdout == "" and "is pending" in held.stderr
    updated = ok_json(hpcui(work, "update", job_id, "--time", "4m", "--json"))
    assert updated["message"] == "time limit now 00:04:00"
    assert ok_json(hpcui(work, "release", job_id, "--json"))[0]["ok"] is True
    logs = hpcui(work, "logs", job_id, "--follow")
    assert logs.returncode == 0 and "line 5" in logs.stdout
    missing = hpcui(work, "hold", "99999999")
    assert missing.returncode == 2 and "does not know job 99999999" in missing.stderr
    free = ok_json(hpcui(work, "free", "--json"))
    assert {p["partition"] for p in free["partitions"]} >= {"cpu", "gpu"}
    budget = ok_json(hpcui(work, "budget", "--json"))
    assert any(f["account"] == "hpcacct" for f in budget["fair_share"])
    assert "fair share" in hpcui(work, "budget").stdout.lower()


def test_every_users_queue_lists_a_plain_job_with_its_user(site):
    """`hpcui jobs --all-users` on the real squeue: no --me, each job with its user."""
    job_id = sbatch_script(site, PLAIN.format(tag="a"))
    try:
        everyone = {j.job_id: j for j in site.site.queue(all_users=True)}
        assert everyone[job_id].user == "hpcuser" and not everyone[job_id].hpcui
    finally:
        site.control.cancel([job_id])


def test_raising_ones_own_running_jobs_limit_says_only_operators_may(site):
    """Slurm refuses a user who raises their own running job's limit with the words it
    gives a stranger ("Access/permission denied"): once said as "it is not yours". Said
    now as what it is; lowering works (issue 49, defect 3)."""
    job_id = sbatch_script(site, "#!/bin/bash\nsleep 60\n", "--time=3")
    try:
        wait_state(site, job_id, {JobState.RUNNING})
        with pytest.raises(UsageError) as err:
            site.control.set_time_limit(job_id, "10m")
        said = str(err.value)
        assert "only its operators raise a job's time limit" in said, said
        assert "00:03:00" in said and "00:10:00" in said and "not yours" not in said
        site.control.set_time_limit(job_id, "2m")  # lowering: allowed
        assert site.control.details(job_id).time_limit_s == 120
    finally:
        site.control.cancel([job_id])
