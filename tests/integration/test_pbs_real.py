"""hpcui's PBS Pro dialect end to end on a REAL PBS site (issue 31): OpenPBS 23.06 built
from ../shared/vendor by scripts/devcluster (scripts/devcluster_pbs.py), its server,
scheduler and comm on pbs-head and a mom on each of pbs-n1 and pbs-n2 (4 ngpus each), each
host in its own network namespace. Nothing here is a stand-in: qsub, qstat -f -F json,
qdel, qhold/qrls, qalter, qrerun, pbsnodes and the moms' PBS_NODEFILE are PBS's own."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcui.backends.pbs import status as pbs
from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.errors import JobCancelledError, JobFailedError, SchedulerError, UsageError
from tests.support.jobs import wait_job_state

SKIPPED = Path("/run/hpcui-devcluster/pbs-skipped")
pytestmark = [
    pytest.mark.devcluster,
    pytest.mark.xdist_group("pbs"),  # one site of 2 hosts: one test at a time
    pytest.mark.skipif(
        SKIPPED.exists(), reason=SKIPPED.read_text().strip() if SKIPPED.exists() else ""
    ),
]
PBS_ID = re.compile(r"\d+\.pbs-head")
HOSTS = ("pbs-n1", "pbs-n2")


@pytest.fixture
def site(dev_env) -> Iterator[Cluster]:
    from hpcui.clusters.api import connect

    cluster = connect("pbs")
    yield cluster
    cluster.close()


def add(a, b):
    return a + b


def boom(x):
    raise ValueError(f"pbs boom {x}")


def slow(seconds):
    import time as _t

    _t.sleep(seconds)
    return seconds


def ranks():
    import os as _os
    import socket

    from hpcui.distributed import rank_info

    info = rank_info()
    return {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "world": info.world_size,
        "local_world": info.local_world_size,
        "source": info.source,
        "host": socket.gethostname(),
        "pbs_jobid": _os.environ.get("PBS_JOBID"),
        "nodefile": open(_os.environ["PBS_NODEFILE"]).read().split(),
        "master": _os.environ.get("MASTER_ADDR"),
    }


def test_two_hosts_of_four_ngpus(site):
    from hpcui.backends.pbs.nodes import parse_pbsnodes_json

    text = site.run(["pbsnodes", "-a", "-F", "json"]).check().stdout
    nodes = parse_pbsnodes_json(text, ["normal"], "normal")
    assert sorted(n.node for n in nodes) == list(HOSTS)
    assert {(n.gpus_total, n.cpus_total, n.usable) for n in nodes} == {(4, 8, True)}


def test_submit_result_traceback_and_the_servers_record(site):
    job = site.submit(add, 1, 2, time="5m")
    assert PBS_ID.fullmatch(job.job_id), job.job_id
    assert job.result(timeout=120) == 3
    assert job.state is JobState.COMPLETED
    text = site.run(["qstat", "-x", "-f", "-F", "json", job.job_id]).check().stdout
    (rec,) = pbs.parse_qstat_json(text)
    assert rec.state is JobState.COMPLETED and rec.exit_status == 0
    assert rec.resources_requested["walltime"] == "00:05:00"
    token = site.registry.get(site.name, job.job_id).token
    assert site.scheduler.find_token(token) == job.job_id  # HPCUI_TOKEN in Variable_List
    bad = site.submit(boom, 7, time="5m")
    with pytest.raises(JobFailedError) as err:
        bad.result(timeout=120)
    assert "ValueError: pbs boom 7" in str(err.value) and "test_pbs_real.py" in str(err.value)
    assert bad.state is JobState.FAILED


def test_map_is_one_qsub_J_array(site):
    jobs = site.map(add, range(6), range(10, 16), time="5m")
    assert len({j.job_id.rsplit("_", 1)[0] for j in jobs}) == 1  # one array: one qsub
    assert [j.job_id.rsplit("_", 1)[1] for j in jobs] == [str(i) for i in range(6)]
    site.status.poll_once()
    assert site.status.last_poll_calls == 1
    assert [j.result(timeout=180) for j in jobs] == [a + b for a, b in zip(range(6), range(10, 16))]
    assert {j.state for j in jobs} == {JobState.COMPLETED}
    number = jobs[0].job_id.split(".")[0]
    text = (
        site.run(["qstat", "-x", "-t", "-f", "-F", "json", f"{number}[].pbs-head"]).check().stdout
    )
    found = {r.job_id.split(".")[0]: r for r in pbs.parse_qstat_json(text)}
    assert set(found) == {f"{number}[]", *(f"{number}[{i}]" for i in range(6))}  # -t: subjobs
    assert {found[f"{number}[{i}]"].state for i in range(6)} == {JobState.COMPLETED}


def test_eight_ranks_on_two_hosts_one_master(site):
    job = site.submit(ranks, gpus=8, time="5m")
    script = site.registry.get(site.name, job.job_id).meta["script"]
    assert "#PBS -l place=scatter" in script and "ngpus=4" in script
    values = job.results(timeout=180)
    assert [v["rank"] for v in values] == list(range(8))
    assert [v["local_rank"] for v in values] == [0, 1, 2, 3] * 2
    assert {(v["world"], v["local_world"], v["source"]) for v in values} == {(8, 4, "pbs")}
    hosts = [v["host"] for v in values]
    assert sorted(set(hosts)) == list(HOSTS) and hosts[:4] == [hosts[0]] * 4
    assert {tuple(v["nodefile"]) for v in values} == {(hosts[0],) * 4 + (hosts[4],) * 4}
    assert {v["pbs_jobid"] for v in values} == {job.job_id}


def test_qdel_of_a_running_job_and_of_an_array(site):
    job = site.submit(slow, 300, time="10m")
    wait_job_state(job, {JobState.RUNNING}, 120)
    job.cancel()
    assert job.wait(timeout=90) is JobState.CANCELLED
    with pytest.raises(JobCancelledError):
        job.result()
    jobs = site.map(slow, [300] * 3, time="10m")
    wait_job_state(jobs[0], {JobState.RUNNING}, 120)
    site.control.cancel([j.job_id for j in jobs])  # the app's folded row: every element
    assert {j.wait(timeout=90) for j in jobs} == {JobState.CANCELLED}


def test_a_rejected_request_is_the_servers_words(dev_env):
    """A profile that says more than the server allows (ai's walltime is 12 h on the server):
    hpcui lets 13 h through, qsub refuses, and the server's words come back (exit 4)."""
    from hpcui.config import load_config

    cfg = load_config().cluster("pbs")
    loose = cfg.model_copy(
        update={"profile_overrides": {"partitions": {"ai": {"max_time": "24h"}}}}
    )
    with Cluster(loose) as cluster:
        with pytest.raises(SchedulerError) as err:
            cluster.submit(add, 1, 2, gpus=4, partition="ai", time="13h")
    assert err.value.exit_code == 4
    assert "qsub: Job violates queue and/or server resource limits" in str(err.value)
    assert "over a limit of the queue or the server" in str(err.value)


def test_hold_release_walltime_rerun_and_afterok(site):
    """Issue 23's controls on the real server: Output_Path without its host, a user hold and
    its release, a new walltime, afterok (-W depend=). What the stand-in got wrong: PBS
    takes a hold on a RUNNING job (it runs on; the hold counts if it is requeued), and
    qrerun is for PBS operators and managers only ("Unauthorized Request" for a user)."""
    first = site.submit(slow, 8, time="5m", name="pbs-first", extra=["-h"])
    second = site.submit(add, 4, 5, time="5m", name="pbs-second", after_ok=[first])
    try:
        d = site.control.details(first.job_id)
        assert d.state is JobState.PENDING and d.state_raw == "H"
        assert d.stdout.startswith("/") and ":" not in d.stdout
        assert site.control.details(second.job_id).state_raw == "H"  # waits on its dependency
        site.control.set_time_limit(first.job_id, "7m")
        assert site.control.details(first.job_id).time_limit_s == 420
        site.control.release([first.job_id])
        deadline = time.monotonic() + 90
        while site.control.details(first.job_id).state is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the released job never ran"
            time.sleep(0.5)
        site.control.hold([first.job_id])
        assert site.control.details(first.job_id).state is JobState.RUNNING
        with pytest.raises(UsageError, match="only PBS operators and managers may rerun"):
            site.control.requeue([first.job_id])
        assert second.result(timeout=180) == 9  # ran only after first completed
        assert first.result(timeout=60) == 8
        with pytest.raises(UsageError, match="PBS does not know job"):
            site.control.details("999999.pbs-head")
    finally:
        site.control.cancel([first.job_id, second.job_id])


DROP_QSUB = """#!/bin/sh
# test stand-in around PBS's own qsub: submits, then (when armed) cuts this login session's
# link - SIGKILL to its sshd - before the job id reaches the client
id=$(/opt/hpcui-devcluster/pbs/bin/qsub "$@") || { rc=$?; echo "$id"; exit $rc; }
if [ -e "$HOME/pbsdrop/armed" ]; then
  rm -f "$HOME/pbsdrop/armed"
  p=$$
  while [ "$p" -gt 1 ] && [ "$(ps -o comm= -p "$p")" != sshd ]; do
    p=$(ps -o ppid= -p "$p" | tr -d ' ')
  done
  kill -9 "$p"
  sleep 5
fi
echo "$id"
"""


class DropOnPath:
    """The cluster's transport with ~/pbsdrop/bin first on PATH for every command."""

    def __init__(self, inner):
        self.inner = inner
        self.description = inner.description
        self.prefix = b'export PATH="$HOME/pbsdrop/bin:$PATH"; '

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, cmd, *, timeout=None, stdin=None):
        from hpcui.transport.quoting import to_command

        return self.inner.run(self.prefix + to_command(cmd), timeout=timeout, stdin=stdin)

    def put_files(self, directory, files, *, then=None, first=None):
        from hpcui.transport.quoting import to_command

        then = None if then is None else self.prefix + to_command(then)
        return self.inner.put_files(directory, files, then=then, first=first)


def test_a_link_dropped_during_qsub_leaves_exactly_one_job(dev_env):
    """The server took the job, the link died before its id came back: hpcui reconnects,
    finds the job by its token (HPCUI_TOKEN in Variable_List, one qstat per id since
    OpenPBS prints only the first with -F json) and the submit returns that one job."""
    import uuid

    from hpcui.config import load_config

    cfg = load_config().cluster("pbs")
    plain = Cluster(cfg)
    plain.run("mkdir -p ~/pbsdrop/bin").check()
    plain.transport.write_file("/home/hpcuser/pbsdrop/bin/qsub", DROP_QSUB.encode(), mode=0o755)
    cluster = Cluster(cfg, transport=DropOnPath(plain.transport))
    try:
        name = f"pbsdrop{uuid.uuid4().hex[:8]}"
        connects = plain.transport.connects
        cluster.run("touch ~/pbsdrop/armed").check()
        job = cluster.submit(add, 20, 22, name=name, time="5m")
        assert plain.transport.connects == connects + 1  # the link really was lost
        ids = cluster.run(["qselect", "-x", "-N", name]).check().stdout.split()
        assert ids == [job.job_id]  # exactly one job, the one hpcui returned
        assert job.result(timeout=120) == 42
    finally:
        cluster.run("rm -f ~/pbsdrop/armed")
        plain.close()


def ddp_sum(launcher_name):
    import os

    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    hd.cleanup()
    return {
        "rank": rank,
        "world": world,
        "sum": t.item(),
        "master": os.environ.get("MASTER_ADDR"),
        "host": __import__("socket").gethostname(),
        "launcher": launcher_name,
    }


@pytest.mark.parametrize("launcher", ["submitit", "torchrun"])
def test_ddp_eight_ranks_over_two_hosts(dev_env, launcher):
    """gloo all_reduce over pbs-n1 and pbs-n2 (4 ranks each): one MASTER_ADDR, the first
    host of PBS_NODEFILE; with torchrun one agent per host and a c10d rendezvous."""
    from hpcui.config import load_config

    cfg = (
        load_config()
        .cluster("pbs")
        .model_copy(update={"python": "/opt/hpcui-devcluster/venv/bin/python"})
    )
    with Cluster(cfg) as cluster:
        job = cluster.submit(ddp_sum, launcher, gpus=8, launcher=launcher, time="10m")
        values = job.results(timeout=300)
    assert [v["rank"] for v in values] == list(range(8))
    assert {(v["world"], v["sum"]) for v in values} == {(8, 36.0)}
    assert len({v["master"] for v in values}) == 1 and values[0]["master"] == values[0]["host"]
    assert sorted({v["host"] for v in values}) == list(HOSTS)


TICKS = "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done"


def test_another_jobs_log_at_its_end_by_default_and_live_with_k_oed(site):
    """A plain qsub job: with the default Keep_Files PBS copies its output at the end, and
    hpcui says so; with `-k oed` the file is written in place and followed while it runs."""
    import uuid

    from hpcui.jobs.other import OtherJob

    out = f"/home/hpcuser/pbslogs-{uuid.uuid4().hex[:8]}"  # -k oed appends to a file
    spooled = (
        site.run(f"cd /tmp && echo {TICKS!r} | qsub -N spooled -o {out}-spooled.out -j oe")
        .check()
        .stdout.strip()
    )
    direct = (
        site.run(f"cd /tmp && echo {TICKS!r} | qsub -N direct -k oed -o {out}-direct.out -j oe")
        .check()
        .stdout.strip()
    )
    handle = site.job(direct)
    assert isinstance(handle, OtherJob)
    deadline = time.monotonic() + 60
    while handle.details.state is not JobState.RUNNING:
        assert time.monotonic() < deadline, "the -k oed job never ran"
        time.sleep(0.5)
        handle = site.job(direct)
    assert handle.details.log_note == ""  # written in place: nothing to wait for
    time.sleep(2.5)
    early = "".join(c.text for c in handle.logs("stdout"))
    assert "tick 1" in early and "tick 6" not in early  # live, before the end
    other = site.job(spooled)
    if other.details.state is JobState.RUNNING:
        assert "until it ends (Keep_Files=n)" in other.details.log_note
    whole = "".join(c.text for c in handle.logs("stdout", follow=True))
    assert [ln for ln in whole.splitlines() if ln.startswith("tick")] == [
        f"tick {i}" for i in range(1, 7)
    ]
    later = site.job(spooled)
    wait_text = "".join(c.text for c in later.logs("stdout", follow=True))
    assert "tick 6" in wait_text
    site.run(f"rm -f {out}-*")


def test_the_queue_table_and_history_from_qstat_x(site):
    job = site.submit(slow, 30, time="5m", name="pbs-queue-row")
    wait_job_state(job, {JobState.RUNNING}, 120)
    rows = {q.job_id: q for q in site.site.queue()}
    row = rows[job.job_id]
    assert row.state is JobState.RUNNING and row.partition == "normal" and row.hpcui
    assert row.nodes == 1 and row.nodelist in HOSTS
    job.cancel()
    job.wait(timeout=60)
    done = site.submit(add, 2, 3, time="5m", name="pbs-history-row")
    assert done.result(timeout=120) == 5
    history = {h.job_id: h for h in site.site.history()}
    assert history[done.job_id].state is JobState.COMPLETED
    assert history[job.job_id].state is JobState.CANCELLED


def stops_when_asked(limit):
    import time as _t

    from hpcui.distributed import stop_requested

    for i in range(limit):
        if stop_requested():
            return f"stopped at {i}"
        _t.sleep(0.5)
    return "ran out"


def test_graceful_stop(site):
    job = site.submit(stops_when_asked, 240, time="5m")
    wait_job_state(job, {JobState.RUNNING}, 120)
    time.sleep(1)
    job.stop()
    assert job.result(timeout=90).startswith("stopped at")


def test_the_aspire_profiles_scripts_are_accepted_as_rendered(dev_env):
    """ASPIRE 2A+'s rendering (select=...:ngpus=8, -P project, torchrun) to the real server:
    qsub takes both scripts as they are (held: this site's hosts have 4 ngpus, not 8)."""
    from hpcui.config import load_config

    cfg = (
        load_config()
        .cluster("pbs")
        .model_copy(update={"profile": "aspire2a-plus", "defaults": {"account": "12345678"}})
    )
    with Cluster(cfg) as cluster:
        for kwargs in ({"gpus": 8}, {"gpus": 16, "launcher": "torchrun"}):
            shown = cluster.preview_script(time="1h", name="aspire-as-rendered", **kwargs)
            assert "#PBS -P 12345678" in shown.script and "ngpus=8" in shown.script
            script = shown.script.replace("HOME/", "/home/hpcuser/")
            res = cluster.transport.run("cd /tmp && qsub -h", stdin=script.encode())
            assert res.ok, res.stderr
            job_id = res.stdout.strip()
            assert PBS_ID.fullmatch(job_id)
            cluster.run(["qdel", job_id])


def test_the_cli_on_the_pbs_site(tmp_path, devcluster):
    """submit, jobs, show, logs, free and cancel through `hpcui -c pbs ...` (a subprocess
    without a terminal, as CI and scripts run it)."""
    import json

    from tests.integration.test_cli import TASKS, hpcui

    (tmp_path / "clitasks.py").write_text(TASKS)
    (tmp_path / "data").mkdir()

    def ok(*args):
        res = hpcui(tmp_path, "-c", "pbs", *args)
        assert res.returncode == 0, res.stderr
        return res

    rec = json.loads(
        ok("submit", "clitasks:add", "--args", "[2, 3]", "--time", "5m", "--json").stdout
    )
    job = rec["job_id"]
    assert PBS_ID.fullmatch(job)
    assert json.loads(ok("result", job, "--json").stdout)["value"] == {"sum": 5}
    assert "adding 2+3" in ok("logs", job).stdout
    shown = json.loads(ok("show", job, "--json").stdout)
    assert shown["state"] == "COMPLETED" and shown["cluster"] == "pbs"
    free = json.loads(ok("free", "--json").stdout)
    parts = {p["partition"]: p for p in free["partitions"]}
    assert set(parts) == {"normal", "ai"} and parts["normal"]["is_default"]
    assert parts["normal"]["gpus_total"] == 8
    assert {n["node"] for n in free["nodes"]} == set(HOSTS)
    slow_job = json.loads(
        ok("submit", "clitasks:slow", "--args", "[120]", "--time", "5m", "--json").stdout
    )["job_id"]
    rows = json.loads(ok("jobs", "--json").stdout)
    assert slow_job in {r["job_id"] for r in rows}
    assert ok("cancel", slow_job).returncode == 0
    standing = hpcui(tmp_path, "-c", "pbs", "budget")
    assert standing.returncode == 2 and "PBS has no sshare/sprio" in standing.stderr


def test_the_app_lists_and_opens_a_pbs_job(dev_env):
    import asyncio

    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.job_table import JobTable
    from hpcui.tui.screens.job import JobScreen
    from tests.support.pilot import wait_for

    async def go() -> tuple[str, list[str]]:
        app = HpcuiApp("pbs", connect=["pbs"])
        async with app.run_test(size=(140, 36)) as pilot:
            await wait_for(pilot, lambda: app.hub.conns["pbs"].status == "connected", 60)
            cluster = app.hub.cluster("pbs")
            job = await asyncio.to_thread(cluster.submit, add, 20, 22, name="pbs-app", time="5m")
            table = app.screen.query_one("#live", JobTable)
            key = f"pbs:{job.job_id}"
            await wait_for(pilot, lambda: key in table.shown, 60)
            await asyncio.to_thread(job.wait, 120)
            app.open_job("pbs", job.job_id)
            await wait_for(pilot, lambda: isinstance(app.screen, JobScreen), 10)
            screen = app.screen
            await wait_for(pilot, lambda: bool(screen.query("#result")), 10)  # composed
            result = screen.query_one("#result")
            await wait_for(pilot, lambda: "42" in str(result.render()), 60)
            return str(table.shown.get(key, {}).get("name", "")), screen.panel.lines

    name, _lines = asyncio.run(go())
    assert name == "pbs-app"


def test_fsdp_shards_over_two_hosts(dev_env):
    """The examples' DDP-or-FSDP experiment as FSDP on 8 ranks over pbs-n1 and pbs-n2:
    each rank holds about an eighth of the model's parameters."""
    from examples.ddp_or_fsdp import experiment
    from hpcui.config import load_config

    cfg = (
        load_config()
        .cluster("pbs")
        .model_copy(update={"python": "/opt/hpcui-devcluster/venv/bin/python"})
    )
    with Cluster(cfg) as cluster:
        job = cluster.submit(experiment, "fsdp", 256, 4, 16, gpus=8, time="10m")
        values = job.results(timeout=300)
    assert [v["rank"] for v in values] == list(range(8))
    assert {(v["mode"], v["world"]) for v in values} == {("fsdp", 8)}
    assert sorted({v["host"] for v in values}) == list(HOSTS)
    whole = sum(v["model_bytes"] for v in values)  # each rank counts its own shard
    assert max(v["model_bytes"] for v in values) < whole / 4  # an eighth each, not a copy


def square(x):
    return x * x


def test_a_map_of_a_hundred_is_one_qsub_J(site):
    jobs = site.map(square, range(100), time="5m")
    parents = {j.job_id.rsplit("_", 1)[0] for j in jobs}
    assert len(parents) == 1  # ONE qsub -J 0-99
    script = site.registry.get(site.name, jobs[0].job_id).meta["script"]
    assert "#PBS -J 0-99" in script
    assert [j.result(timeout=300) for j in jobs] == [x * x for x in range(100)]


def in_image(x):
    import os
    import socket

    return {
        "image": open("/etc/hpcui-image").read().strip(),
        "host": socket.gethostname(),
        "pbs_jobid": os.environ.get("PBS_JOBID"),
        "double": 2 * x,
    }


@pytest.mark.skipif(
    Path("/run/hpcui-devcluster/containers-skipped").exists(),
    reason="no container runtimes (../shared/vendor lacks enroot or pyxis)",
)
@pytest.mark.parametrize("runtime", ["enroot", "apptainer"])
def test_a_callable_inside_an_image_on_the_pbs_site(site, runtime):
    """Issue 32 on PBS: the PBS renderer's container wrap on a real PBS job (enroot, and
    the apptainer STAND-IN), the image's Python checked on the login host first."""
    image = "/var/lib/hpcui-devcluster/images/pytorch.sqsh"
    job = site.submit(in_image, 21, container=image, container_runtime=runtime, time="5m")
    value = job.result(timeout=180)
    assert value["image"].startswith("hpcui dev image pytorch") and value["double"] == 42
    assert value["host"] in HOSTS and value["pbs_jobid"] == job.job_id


def test_a_forward_stops_the_moment_its_pbs_job_is_known_over(site):
    """The forward of a PBS job ends with the job, without waiting for the 15 s check
    (its port on the node is anyone's once the job is over)."""
    import urllib.request

    from tests.integration.test_services import listing_through, serve_for

    job = site.submit(serve_for, 5, time="5m", name="served")
    port = ""
    for _ in range(240):
        res = site.run(["cat", f"{job.folder}/port"])
        if res.ok and (port := res.stdout.strip()):
            break
        time.sleep(0.25)
    fwd = site.control.forward(job.job_id, int(port))
    try:
        assert "Directory listing" in listing_through(fwd)
        while True:  # the scheduler says it ended (the test asks, not the forward)
            st = site.scheduler.status([job.job_id]).get(job.job_id)
            if st is not None and st.state.is_final:
                break
            time.sleep(0.1)
        assert fwd.wait(5), "the forward outlived its job"
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://{fwd.address}/", timeout=5).read()
    finally:
        fwd.close()


def test_show_says_a_cancelled_job_is_ending_and_free_shows_memory(site, tmp_path):
    """Issue 49, defect 7: after `hpcui cancel`, PBS keeps the job R until its processes
    are gone (the mom's kill_delay): `show` said a plain RUNNING for 10 s; `free --nodes`
    printed `None/16384 MB` for a node with nothing assigned."""
    from tests.integration.test_usage_dev import cli
    from tests.integration.test_waiting_job_show import fields

    job = site.submit(slow, 120, cpus_per_task=1, mem="100M", time="5m", name="ending")
    wait_job_state(job, {JobState.RUNNING}, timeout=60)
    res = cli("-c", "pbs", "cancel", job.job_id)
    assert res.returncode == 0, res.stderr
    shown = fields(cli("-c", "pbs", "show", job.job_id).stdout)
    state = shown["state"]
    assert state.startswith("CANCELLED") or "being cancelled (cancel accepted at" in state, shown
    wait_job_state(job, {JobState.CANCELLED}, timeout=60)
    shown = fields(cli("-c", "pbs", "show", job.job_id).stdout)
    assert shown["state"] == "CANCELLED (F)", shown  # over: no "being cancelled" left
    nodes = cli("-c", "pbs", "free", "--nodes").stdout
    assert "None" not in nodes and re.search(r"\d+/16384 MB", nodes), nodes
