"""Site state on both dev sites (Slurm 22.05 + Lmod 8.6, Slurm 24.11 + Lmod 8.7, each with
slurmdbd) and their filesystems, over SSH.

Other tests share the cluster: every assertion is about jobs these tests submitted
(filtered by id), never about the queue being otherwise empty.
"""

from __future__ import annotations

import threading
import time

import pytest

from hpcui.backends.states import JobState
from hpcui.sitestate import QueueSnapshot
from tests.conftest import NODE_PREFIX

pytestmark = pytest.mark.devcluster


def add(a, b):
    return a + b


def sleepy(seconds):
    import time as _t

    _t.sleep(seconds)
    return seconds


def ticker(n, every):
    import sys as _sys
    import time as _t

    for i in range(n):
        print(f"tick {i}", flush=True)
        _t.sleep(every)
    print("tock on stderr", file=_sys.stderr, flush=True)
    return n


def sbatch(dev, *args: str) -> str:
    """A job hpcui did not submit (plain sbatch through the cluster's transport)."""
    res = dev.run(["sbatch", "--parsable", "--time=5", *args]).check("sbatch")
    return res.stdout.strip().split(";")[0]


def wait_history(dev, job_id: str, timeout: float = 120, *, rss: bool = True):
    """The job's history once it ended and its batch step's usage reached slurmdbd: for a
    moment after the end, sacct shows FAILED with ExitCode 0:0 and no MaxRSS."""
    deadline = time.monotonic() + timeout
    while True:
        found = {h.job_id: h for h in dev.site.history(job_ids=[job_id])}
        entry = found.get(job_id)
        if entry is not None and entry.state.is_final and (entry.max_rss_bytes or not rss):
            return entry
        assert time.monotonic() < deadline, f"job {job_id} not finished: {entry}"
        time.sleep(1)


def test_queue_lists_all_jobs_marks_ours_and_shows_the_expected_start(site):
    ours = site.submit(sleepy, 60, time="5m", name="site-ours")
    later = sbatch(site, "--job-name=site-foreign", "--begin=now+120", "--wrap", "true")
    try:
        jobs = {j.job_id: j for j in site.site.queue()}
        mine, foreign = jobs[ours.job_id], jobs[later]
        record = site.registry.get(site.name, ours.job_id)
        assert mine.hpcui and mine.token == record.token
        assert mine.name == "site-ours" and mine.user == "hpcuser"
        assert mine.time_limit_s == 300
        assert not foreign.hpcui and foreign.token is None
        assert foreign.name == "site-foreign"
        assert foreign.state is JobState.PENDING and foreign.reason == "BeginTime"
        # the scheduler's expected start for a pending job: its --begin time
        assert foreign.start_time is not None and foreign.submit_time is not None
        lead = (foreign.start_time - foreign.submit_time).total_seconds()
        assert 110 <= lead <= 130, lead
    finally:
        site.scheduler.cancel([ours.job_id, later])


def test_history_has_exit_codes_usage_and_the_efficiency_line(site):
    failing = sbatch(
        site,
        "--job-name=site-fail",
        "--mem=400M",
        "--wrap",
        # 80 MiB written page by page (RSS), held across two 2 s accounting samples
        "python3 -c 'b = b\"x\" * (80 * 1024 * 1024); import time; time.sleep(5)'; exit 3",
    )
    ok = site.submit(add, 2, 3, time="5m", name="site-ok")
    assert ok.result(timeout=120) == 5
    failed = wait_history(site, failing)
    assert (failed.state, failed.exit_code, failed.signal) == (JobState.FAILED, 3, 0), failed
    assert not failed.hpcui and failed.name == "site-fail"
    assert failed.elapsed_s is not None and failed.elapsed_s >= 5, failed
    assert failed.cpu_time_s is not None and failed.cpu_time_s > 0
    assert failed.mem_bytes == 400 * 1024**2
    assert failed.max_rss_bytes is not None and failed.max_rss_bytes >= 80 * 1024**2, failed
    assert failed.efficiency.startswith("CPU ") and "of 400.0 MiB" in failed.efficiency, failed
    done = wait_history(site, ok.job_id, rss=False)  # too short for a MaxRSS sample
    assert done.state is JobState.COMPLETED and done.exit_code == 0
    assert done.hpcui and done.token == site.registry.get(site.name, ok.job_id).token
    # the default window (last day) holds both
    recent = {h.job_id for h in site.site.history()}
    assert {failing, ok.job_id} <= recent, (failing, ok.job_id)


def test_one_scheduler_call_per_refresh_with_many_subscribers(site):
    watcher = site.site.queue_watcher
    seen: list[list[QueueSnapshot]] = [[] for _ in range(5)]
    subs = [watcher.subscribe(seen[i].append) for i in range(5)]
    try:
        deadline = time.monotonic() + 60
        while not all(seen) and time.monotonic() < deadline:  # the loop's first refresh
            time.sleep(0.05)
        calls0, fetches0 = site.scheduler.calls, watcher.fetches
        for _ in range(3):
            # five screens asking at once share one squeue
            threads = [threading.Thread(target=site.site.queue) for _ in range(5)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        fetches = watcher.fetches - fetches0
        assert site.scheduler.calls - calls0 == fetches
        assert 3 <= fetches <= 6, fetches  # 15 callers, 3 rounds (+ the loop's own refresh)
        assert all(len(s) >= 3 for s in seen)
        assert seen[0][-1] is seen[4][-1]
    finally:
        for s in subs:
            s.cancel()


def test_partitions(site):
    parts = {p.partition: p for p in site.site.partitions()}
    assert set(parts) >= {"cpu", "gpu"}
    assert parts["cpu"].is_default and not parts["gpu"].is_default
    assert parts["gpu"].gpus_per_node == 4
    gpu = parts["gpu"]  # every site node: 8 CPUs, 4 GPUs; at least two nodes
    assert gpu.nodes_total >= 2 and gpu.cpus_total == 8 * gpu.nodes_total
    assert gpu.nodelist == f"{NODE_PREFIX[site.name]}[1-{gpu.nodes_total}]"
    assert parts["cpu"].time_limit_s == 7200 and parts["cpu"].avail == "up"


def test_quota_falls_back_to_df_in_one_round_trip(site):
    base = site.remote_info().base  # the job base exists from here on
    report = site.site.quota_report()
    assert report.own is not None and report.own.base == base  # hpcui's own share
    assert report.own.files >= 3 and report.own.bytes > 0  # base, jobs/, runtime/ at least
    assert report.own.share_of_file_limit is None  # df knows no file limit
    assert report.tool == "df"
    tried = {t.tool: t.exit_status for t in report.tried}
    assert tried["bsc_quota"] is None and tried["lfs quota"] is None and tried["quota"] is None
    assert tried["df"] == 0
    (row,) = report.entries
    assert row.kind == "DF" and row.filesystem.startswith("/")
    assert row.used_bytes and row.hard_bytes and 0 < row.used_bytes < row.hard_bytes
    (again,) = site.site.quota()  # the same source; usage moves as other tests write files
    assert (again.filesystem, again.kind, again.hard_bytes) == (
        row.filesystem,
        "DF",
        row.hard_bytes,
    )
    assert abs(again.used_bytes - row.used_bytes) < row.hard_bytes // 100


def test_lmod_modules_live(site):
    """Lmod 8.6.19 (dev) and 8.7.60 (dev24), each with an alias (torch -> pytorch/2.13.0)
    and a hidden module (cuda/12.2): read the same way, each module listed once."""
    assert site.site.module_system == "lmod"
    state = site.site.modules()
    avail = {m.full_name: m for m in state.available}
    assert {"python/3.11", "cuda/12.2", "cuda/12.4", "pytorch/2.13.0", "torch"} <= set(avail)
    assert avail["cuda/12.4"].default and not avail["cuda/12.2"].default
    assert avail["cuda/12.2"].hidden and not avail["cuda/12.4"].hidden
    assert avail["torch"].alias_of == "pytorch/2.13.0"
    assert avail["pytorch/2.13.0"].description.startswith("PyTorch")
    assert [m.full_name for m in state.available].count("cuda/12.2") == 1
    assert state.loaded == []
    found = {m.full_name: m.default for m in site.site.module_search("cuda")}
    assert found == {"cuda/12.4": True}  # hidden ones left out; the default marked
    site.config.setup = ["module load python/3.11 torch cuda/12.2"]
    jobs_see = site.site.modules(with_setup=True).loaded
    assert [(m.full_name, m.hidden) for m in jobs_see] == [
        ("python/3.11", False),
        ("pytorch/2.13.0", False),
        ("cuda/12.2", True),
    ]
    assert site.site.modules(with_setup=True).setup_failure is None
    site.config.setup = ["module load cuda/12.4 python nope/1.0 torch cuda/12.2"]
    assert site.site.missing_setup_modules() == ["nope/1.0"]
    # what the site's Lmod says when the setup fails comes back, read (both Lmod versions)
    failed = site.site.modules(with_setup=True)
    assert failed.setup_failure is not None and failed.setup_failure.modules == ["nope/1.0"]
    assert "module spider" in failed.setup_failure.message
    assert all("#hpcui-setup#" not in m.full_name for m in failed.loaded)
    if site.name == "dev24":  # Lmod 8.7.60's alias lines and hidden versions (issue 38)
        site.config.setup = ["module load gcc/13 nvhpc/24"]
        loaded = site.site.modules(with_setup=True).loaded
        assert [(m.full_name, m.aliases, m.hidden) for m in loaded] == [
            ("gcc/13.2.0", ("gcc/13",), False),
            ("nvhpc/24.4.0", ("nvhpc/24",), True),
        ]
        avail = {m.full_name: m for m in state.available}
        assert avail["nvhpc/23.11"].default and not avail["nvhpc/24.4.0"].default
        assert avail["nccl/.2.21"].hidden and avail["nccl/2.18"].default


def test_follow_a_running_jobs_log(site):
    job = site.submit(ticker, 20, 0.2, time="5m", name="site-ticker")
    followed = job.logs("stdout", 0, follow=True, timeout=180, spool=False)  # nothing kept
    chunks = [c.text for c in followed]
    text = "".join(chunks)
    ticks = [line for line in text.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(20)]
    # it arrived while the job ran, not in one piece at the end
    assert sum(1 for c in chunks if "tick" in c) >= 2
    assert job.result(timeout=60) == 20
    # non-following read of every rank, both streams, through the cluster
    (out,) = list(site.logs(job, "stdout"))
    assert out.task == 0 and out.offset == 0 and out.text == text
    err = "".join(c.text for c in site.logs(job, "stderr", rank=0))
    assert "tock on stderr" in err


def add_one(x):
    return x + 1


def test_missing_setup_module_is_refused_before_submitting(dev_env, site_name):
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config
    from hpcui.errors import UsageError

    # a job base of its own: parallel tests submit into the shared ~/.hpcui meanwhile
    base = load_config().cluster(site_name).model_copy(update={"remote_base": "~/.hpcui-setup"})
    lines = [*(base.setup or []), "module load cuda/12.4", "module load nosuchmod/1.0"]
    bad = base.model_copy(update={"setup": lines})
    with Cluster(bad) as c:
        before = c.run("ls ~/.hpcui-setup/jobs 2>/dev/null | wc -l").stdout
        with pytest.raises(UsageError, match=r"nosuchmod/1\.0") as err:
            c.submit(add_one, 1)
        assert "cuda" not in str(err.value).split("loads")[1].split(",")[0]
        assert c.run("ls ~/.hpcui-setup/jobs 2>/dev/null | wc -l").stdout == before
    # a hidden module and an alias are loadable: not refused
    good = base.model_copy(update={"setup": [*(base.setup or []), "module load cuda/12.2 torch"]})
    with Cluster(good) as c:
        assert c.submit(add_one, 1, time="5m").result(timeout=120) == 2
