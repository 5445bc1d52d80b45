from datetime import timedelta

import pytest

from hpcui.backends.slurm.script import directives, render_script
from hpcui.common.units import UnitWarning
from hpcui.errors import UsageError
from hpcui.profiles import load_profile
from hpcui.request.plan import batch_spec, explain, resolve
from hpcui.request.resources import Resources, parse_mem_mb, parse_time


def plan(profile: str, **kwargs):
    return resolve(Resources.from_kwargs(**kwargs), load_profile(profile))


BOOKKEEPING = ("--job-name=", "--comment=", "--output=", "--error=", "--signal=", "--open-mode=")


def sbatch(profile: str, **kwargs) -> list[str]:
    """The resource directives hpcui renders for a request (job bookkeeping lines left out)."""
    spec = batch_spec(plan(profile, **kwargs), folder="/f", token="t")
    return [d for d in directives(spec) if not d.startswith(BOOKKEEPING)]


# -- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1:00:00", 3600),
        ("90m", 5400),
        ("2h", 7200),
        ("1-00:00:00", 86400),
        (45, 45),
        (timedelta(minutes=3), 180),
        ("30", 1800),
        ("1:30", 90),
        ("2-12", 216000),
        ("1.5h", 5400),
    ],
)
def test_parse_time(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "-5", 0, "1:2:3:4", "h"])
def test_parse_time_rejects(bad):
    with pytest.raises(ValueError):
        parse_time(bad)


def test_parse_mem():
    assert parse_mem_mb("4G") == 4096
    assert parse_mem_mb("500M") == 500
    assert parse_mem_mb(1000) == 1000
    with pytest.raises(ValueError):
        parse_mem_mb("lots")


def test_unknown_keyword_points_to_kwargs():
    with pytest.raises(UsageError, match=r"kwargs=\{"):
        Resources.from_kwargs(learning_rate=0.1)
    with pytest.raises(UsageError, match="gpus"):
        Resources.from_kwargs(gpus=-1)


def test_aliases_project_and_queue():
    req = Resources.from_kwargs(project="p1", queue="normal", time="1:00:00", mem="4G")
    assert (req.account, req.partition, req.time_s, req.mem_mb) == ("p1", "normal", 3600, 4096)


def test_cluster_defaults_fill_unset_fields_only():
    req = Resources.from_kwargs(qos="debug").merged({"account": "acct", "qos": "normal"})
    assert (req.account, req.qos) == ("acct", "debug")


# -- golden directives: the centers' documented examples (SITES.md) -------------------------


def test_mn5_course_example_torchrun_whole_node():
    # ddp_or_fsdp.slurm: -n 1 --cpus-per-task=80 --gres=gpu:4 --qos=acc_debug
    #   --account=<acct> --exclusive --hint=nomultithread -t 00:10:00
    got = sbatch(
        "mn5-acc",
        gpus=4,
        launcher="torchrun",
        qos="acc_debug",
        account="bsc99",
        exclusive=True,
        time="00:10:00",
    )
    assert got == [
        "--nodes=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=80",
        "--gres=gpu:4",
        "--time=00:10:00",
        "--qos=acc_debug",
        "--account=bsc99",
        "--exclusive",
        "--hint=nomultithread",
    ]


def test_mn5_one_task_per_gpu_gets_20_cores_each():
    got = sbatch("mn5-acc", gpus=4, qos="acc_debug", account="bsc99", time="10m")
    assert got == [
        "--nodes=1",
        "--ntasks-per-node=4",
        "--cpus-per-task=20",
        "--gres=gpu:4",
        "--time=00:10:00",
        "--qos=acc_debug",
        "--account=bsc99",
        "--hint=nomultithread",
    ]


def test_mn5_multi_node_counts_gpus_per_node():
    got = sbatch("mn5-acc", gpus=16, qos="acc_debug", account="bsc99")
    assert got[:4] == ["--nodes=4", "--ntasks-per-node=4", "--cpus-per-task=20", "--gres=gpu:4"]
    assert not any(d.startswith("--partition") for d in got)  # the QoS decides


def test_mn5_one_gpu_gets_a_quarter_node():
    got = sbatch("mn5-acc", gpus=1, qos="acc_debug", account="bsc99")
    assert got[:4] == ["--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=20", "--gres=gpu:1"]


def test_puhti_course_example():
    # --partition=gpu --nodes=1 --ntasks-per-node=4 --cpus-per-task=10 --mem=320G --gres=gpu:v100:4
    assert sbatch("puhti", gpus=4, account="project_2001234") == [
        "--nodes=1",
        "--ntasks-per-node=4",
        "--cpus-per-task=10",
        "--gres=gpu:v100:4",
        "--mem=320G",
        "--partition=gpu",
        "--account=project_2001234",
    ]


def test_puhti_two_nodes():
    assert sbatch("puhti", gpus=8, account="project_2001234")[:5] == [
        "--nodes=2",
        "--ntasks-per-node=4",
        "--cpus-per-task=10",
        "--gres=gpu:v100:4",
        "--mem=320G",
    ]


def test_lumi_course_example_all_gcds():
    # --partition=small-g --nodes=1 --ntasks-per-node=8 --cpus-per-task=7 --gpus-per-node=8 --mem=480G
    assert sbatch("lumi-g", gpus=8, account="project_465000001") == [
        "--nodes=1",
        "--ntasks-per-node=8",
        "--cpus-per-task=7",
        "--gpus-per-node=8",
        "--mem=480G",
        "--partition=small-g",
        "--account=project_465000001",
    ]


@pytest.mark.parametrize(
    ("gpus", "nodes", "partition"),
    [(1, 1, "small-g"), (16, 2, "small-g"), (32, 4, "small-g"), (40, 5, "standard-g")],
)
def test_lumi_partition_follows_node_count(gpus, nodes, partition):
    got = sbatch("lumi-g", gpus=gpus, account="p")
    per_node = min(gpus, 8)
    assert got == [
        f"--nodes={nodes}",
        f"--ntasks-per-node={per_node}",
        "--cpus-per-task=7",
        f"--gpus-per-node={per_node}",
        f"--mem={60 * per_node}G",
        f"--partition={partition}",
        "--account=p",
    ]


def test_lumi_torchrun_one_task_per_node_with_all_cores():
    got = sbatch("lumi-g", gpus=16, account="p", launcher="torchrun")
    assert got[:5] == [
        "--nodes=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=56",
        "--gpus-per-node=8",
        "--mem=480G",
    ]


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        (1, ["--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=32", "--gres=gpu:a100:1"]),
        (2, ["--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=32", "--gres=gpu:a100:2"]),
        (4, ["--nodes=1", "--ntasks-per-node=4", "--cpus-per-task=32", "--gres=gpu:a100:4"]),
        (8, ["--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=32", "--gres=gpu:a100:4"]),
    ],
)
def test_mahti_gpusmall_up_to_two_gpus_then_gpumedium(gpus, expected):
    partition = "gpusmall" if gpus <= 2 else "gpumedium"
    assert sbatch("mahti", gpus=gpus, account="p") == [
        *expected,
        f"--partition={partition}",
        "--account=p",
    ]


@pytest.mark.parametrize(
    ("profile", "partition", "cores"),
    [("juwels-booster", "booster", 12), ("jureca-dc", "dc-gpu", 32)],
)
def test_jsc_two_nodes(profile, partition, cores):
    assert sbatch(profile, gpus=8, account="training2400", time="1h") == [
        "--nodes=2",
        "--ntasks-per-node=4",
        f"--cpus-per-task={cores}",
        "--gres=gpu:4",
        "--time=01:00:00",
        f"--partition={partition}",
        "--account=training2400",
    ]


def test_dev_cluster():
    assert sbatch("dev", gpus=8, time="1h") == [
        "--nodes=2",
        "--ntasks-per-node=4",
        "--cpus-per-task=2",
        "--gres=gpu:4",
        "--mem=8000M",
        "--time=01:00:00",
        "--partition=gpu",
    ]
    assert sbatch("dev") == [
        "--nodes=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=1",
        "--partition=cpu",
    ]


def test_generic_profile_assumes_nothing():
    assert sbatch("generic", gpus=2, partition="any") == [
        "--nodes=1",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "--gres=gpu:2",
        "--partition=any",
    ]


def test_aspire_course_request_numbers():
    # qsub -l select=1:ngpus=2:mem=400gb -l walltime=3:00:00 -P <project>  (queue normal)
    a = plan("aspire2a-plus", gpus=2, time="3:00:00", project="12003456")
    assert (a.scheduler, a.gpu_directive, a.nodes, a.gpus_per_node) == ("pbs", "ngpus", 1, 2)
    assert (a.tasks_per_node, a.cpus_per_task, a.mem_mb) == (2, 14, 400 * 1024)
    assert (a.partition, a.routed_to, a.account, a.time_s) == ("normal", "aiq1", "12003456", 10800)


# -- PBS queue routing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "time", "routed"),
    [(1, "24h", "aiq1"), (7, "24h", "aiq1"), (8, "12h", "aiq2"), (16, "120h", "aiq2")],
)
def test_aspire_normal_routes(gpus, time, routed):
    assert plan("aspire2a-plus", gpus=gpus, time=time, account="p").routed_to == routed


@pytest.mark.parametrize(
    ("gpus", "time", "why"),
    [
        (4, "48h", "aiq1 allows at most 1d"),
        (16, "121h", "aiq2 allows at most 5d"),
    ],
)
def test_aspire_requests_no_queue_takes_fail_early(gpus, time, why):
    with pytest.raises(UsageError, match=why):
        plan("aspire2a-plus", gpus=gpus, time=time, account="p")


def test_aspire_needs_a_project():
    with pytest.raises(UsageError, match=r"-P <project>"):
        plan("aspire2a-plus", gpus=1)


# -- validation before any network ---------------------------------------------------------


def test_gpu_count_not_multiple_of_node_suggests_valid_counts():
    with pytest.raises(UsageError, match="Ask for 4 or 8 GPUs"):
        plan("dev", gpus=6)
    with pytest.raises(UsageError, match="Ask for 8 or 16 GPUs"):
        plan("lumi-g", gpus=12, account="p")


def test_gpus_beyond_partition_names_limit_and_fix():
    with pytest.raises(UsageError, match=r"'gpusmall'.*at most 2 GPUs.*use partition 'gpumedium'"):
        plan("mahti", gpus=3, partition="gpusmall", account="p")


def test_time_beyond_partition_names_limit_and_fix():
    with pytest.raises(UsageError, match=r"'dev-g'.*at most 3h.*use partition 'small-g'"):
        plan("lumi-g", gpus=8, partition="dev-g", time="4h", account="p")
    with pytest.raises(UsageError, match=r"No partition of dev.*'gpu' allows at most 2h"):
        plan("dev", gpus=1, time="3h")


def test_time_beyond_qos_limit():
    with pytest.raises(
        UsageError, match=r"time=3h exceeds the 2h limit of QoS 'acc_debug'.*acc_bscls"
    ):
        plan("mn5-acc", gpus=4, qos="acc_debug", account="a", time="3h")


def test_project_specific_qos_is_left_to_the_scheduler():
    assert plan("mn5-acc", gpus=4, qos="acc_bsccs", account="a", time="3h").qos == "acc_bsccs"


def test_qos_of_the_other_mn5_partition_is_refused():
    with pytest.raises(UsageError, match=r"start with 'acc_'.*acc_debug"):
        plan("mn5-acc", gpus=4, qos="gp_debug", account="a")
    with pytest.raises(UsageError, match=r"start with 'gp_'"):
        plan("mn5-gpp", qos="acc_debug", account="a")


def test_mn5_needs_qos_and_account():
    with pytest.raises(UsageError, match="needs a QoS"):
        plan("mn5-acc", gpus=4, account="a")
    with pytest.raises(UsageError, match="requires an account"):
        plan("mn5-acc", gpus=4, qos="acc_debug")
    with pytest.raises(UsageError, match="requires an account"):
        plan("juwels-booster", gpus=4)


def test_partition_not_in_profile():
    with pytest.raises(UsageError, match=r"'gpumedium' is not in profile 'puhti'.*gpu, gputest"):
        plan("puhti", gpus=4, partition="gpumedium", account="p")


def test_gpus_on_a_cpu_machine():
    with pytest.raises(UsageError, match="has no GPUs"):
        plan("mn5-gpp", gpus=1, qos="gp_debug", account="a")


def test_cores_and_memory_beyond_the_node():
    with pytest.raises(UsageError, match=r"80 CPUs per node.*puhti nodes have 40"):
        plan("puhti", gpus=4, cpus_per_task=20, account="p")
    with pytest.raises(UsageError, match=r"mem=500G.*384G"):
        plan("puhti", gpus=4, mem="500G", account="p")


def test_explicit_nodes_spread_gpus():
    a = plan("dev", gpus=8, nodes=4, time="1h")
    assert (a.nodes, a.gpus_per_node, a.tasks_per_node) == (4, 2, 2)
    with pytest.raises(UsageError, match="Use nodes=2"):
        plan("dev", gpus=8, nodes=1)


# -- billing advice (LUMI) -------------------------------------------------------------------


def test_lumi_proportional_request_is_billed_by_gcds_without_advice():
    a = plan("lumi-g", gpus=1, account="p")
    assert (a.billed_per_hour, a.billing_unit, a.advice) == (0.5, "GPU-hours", ())
    assert plan("lumi-g", gpus=8, account="p").billed_per_hour == 4.0
    assert plan("lumi-g", gpus=48, account="p").billed_per_hour == 24.0  # standard-g


def test_lumi_half_the_cores_for_one_gcd_is_billed_as_half_a_node():
    a = plan("lumi-g", gpus=1, cpus_per_task=28, account="p")
    assert a.billed_per_hour == 2.0
    (advice,) = a.advice
    assert advice.code == "billed-beyond-use"
    assert advice.suggestion == {"cpus_per_task": 7}
    assert "2 GPU-hours per hour" in advice.message and "gpus=4" in advice.message


def test_lumi_memory_beyond_the_share_gets_advice():
    a = plan("lumi-g", gpus=1, mem="200G", account="p")
    assert a.billed_per_hour == 2.0
    assert a.advice[0].suggestion == {"mem": "60G"}


def test_lumi_standard_g_bills_whole_nodes():
    a = plan("lumi-g", gpus=2, partition="standard-g", account="p")
    assert a.billed_per_hour == 4.0
    assert a.advice[0].code == "billed-whole-nodes"
    assert a.advice[0].suggestion == {"partition": "small-g"}


def test_jsc_whole_nodes_advice():
    a = plan("juwels-booster", gpus=2, account="p")
    assert [x.code for x in a.advice] == ["whole-nodes"]
    assert plan("juwels-booster", gpus=4, account="p").advice == ()


# -- script environment and summary --------------------------------------------------------


def test_site_env_reaches_the_script():
    script = render_script(batch_spec(plan("lumi-g", gpus=8, account="p"), folder="/f", token="t"))
    assert "export NCCL_SOCKET_IFNAME=hsn" in script
    assert "export FI_CXI_DISABLE_CQ_HUGETLB=1" in script
    jsc = plan("juwels-booster", gpus=4, account="p")
    assert jsc.env == {"HPCUI_INTERCONNECT_SUFFIX": "i"}


def test_batch_spec_carries_array_and_runtime():
    a = plan("dev", gpus=4, time="1h", array_parallelism=2, launcher="torchrun")
    spec = batch_spec(a, folder="/f", token="t", array_size=5, setup=["module load x"])
    assert (spec.array_size, spec.array_parallelism, spec.setup) == (5, 2, ("module load x",))
    assert (spec.launcher, spec.tasks_per_node, spec.cpus_per_task) == ("torchrun", 1, 8)


def test_explain():
    text = explain(plan("lumi-g", gpus=1, cpus_per_task=28, account="p", time="2h"))
    lines = text.splitlines()
    assert lines[0] == (
        "1 node(s) x 1 task(s) x 28 cpu(s), 1 GPU(s) (1 per node), 60G per node, 2h "
        "on partition small-g, account p"
    )
    assert lines[1] == "billed 2 GPU-hours per hour (at most 4 for the time limit)"
    assert lines[2].startswith("advice: Partition 'small-g' bills this job 2 GPU-hours")
    routed = explain(plan("aspire2a-plus", gpus=8, account="p", time="1h"))
    assert "partition normal -> aiq2" in routed


# -- the early time-limit signal --------------------------------------------------------------


def _spec(profile: str, **kwargs):
    return batch_spec(plan(profile, **kwargs), folder="/f", token="t")


def test_signal_delay_defaults_to_90_s_and_a_request_or_profile_changes_it():
    assert "--signal=USR2@90" in directives(
        _spec("mn5-acc", gpus=1, qos="acc_debug", account="a", time="1h")
    )
    # unit-less text is still seconds here, as in Slurm's --signal=@N, with a UnitWarning
    # (time= reads it as minutes: hpcui/common/units.py)
    with pytest.warns(UnitWarning):
        assert "--signal=USR2@300" in directives(
            _spec("mn5-acc", gpus=1, qos="acc_debug", account="a", signal_delay="300")
        )
    assert "--signal=USR2@600" in directives(
        _spec("mn5-acc", gpus=1, qos="acc_debug", account="a", signal_delay="10m")
    )
    # unset, it is at most a quarter of a short limit: a 2-minute job is told at 1:30
    two = _spec("mn5-acc", gpus=1, qos="acc_debug", account="a", time="2m")
    assert "--signal=USR2@30" in directives(two)
    profile = load_profile("mn5-acc").model_copy(update={"signal_delay_s": 240})
    alloc = resolve(Resources.from_kwargs(gpus=1, qos="acc_debug", account="a"), profile)
    assert alloc.signal_delay_s == 240


@pytest.mark.parametrize("bad", ["0s", "-5", "19h", "soon"])
def test_signal_delay_out_of_range_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="signal_delay"):
        Resources.from_kwargs(signal_delay=bad)


def test_pbs_runner_is_told_the_walltime_and_delay_and_the_wrapper_gets_slurms_signal():
    from hpcui.backends.pbs import script as pbs_script

    spec = _spec("aspire2a-plus", gpus=1, time="2h", signal_delay="5m", account="p1")
    text = pbs_script.render_script(spec, "pbspro")
    assert "export HPCUI_TIME_LIMIT_S=7200 HPCUI_SIGNAL_DELAY_S=300" in text
    assert 'HPCUI_JOB_START="$(date +%s)"' in text
    wrapper = pbs_script.render_wrapper_script(
        batch_spec(plan("lumi-g", gpus=1, time="1h", account="a"), folder="/f", token="t")
    )
    assert "#SBATCH --signal=USR2@90" in wrapper


def test_a_memory_request_below_100_mb_is_said():
    """Issue 35, small ones: mem="10m" was taken as 10 MB without a word."""
    alloc = plan("mn5-acc", gpus=1, qos="acc_debug", account="a", mem="10m")
    said = [a for a in alloc.advice if a.code == "tiny-mem"]
    assert said and "below 100 MB" in said[0].message and said[0].suggestion == {"mem": "10G"}
    assert not [a for a in plan("mn5-acc", gpus=1, qos="acc_debug", account="a", mem="4G").advice
                if a.code == "tiny-mem"]  # fmt: skip


def test_more_gpus_than_the_cluster_gives_says_its_maximum():
    """Issue 35, small ones: --gpus 99 on the 8-GPU dev cluster suggested 96 or 100."""
    with pytest.raises(UsageError) as err:
        plan("dev", gpus=99)
    assert "at most 8 (partition gpu's limit)" in str(err.value)
    assert "96" not in str(err.value)
    assert plan("dev", gpus=8).nodes == 2


def test_too_many_gpus_on_the_nodes_asked_names_the_per_node_limit():
    """`--gpus 9 --nodes 1` said "at most 8" (the partition's total); the node's 4 is the
    limit met first (issue 49, defect 9)."""
    with pytest.raises(UsageError) as err:
        plan("dev", gpus=9, nodes=1)
    said = str(err.value)
    assert "needs 9 GPUs on a node; dev's nodes have 4" in said and "at most 4 GPUs" in said
    assert "at most 8" not in said
    with pytest.raises(UsageError, match="at most 8"):  # no nodes asked: the total's limit
        plan("dev", gpus=9)
