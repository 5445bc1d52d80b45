"""Parsers and command lines of the any-job, control, free-capacity and standing features,
on real outputs (tests/fixtures/*/COMMANDS.txt and README.md say where each comes from)."""

from __future__ import annotations

import pytest

from hpcui.backends import allocations
from hpcui.backends.batch import BatchSpec
from hpcui.backends.pbs import script as pbs_script
from hpcui.backends.pbs import status as pbs
from hpcui.backends.pbs.job import details as _details
from hpcui.backends.slurm import control as slurm_control
from hpcui.backends.slurm import free as slurm_free
from hpcui.backends.slurm import script as slurm_script
from hpcui.backends.states import JobState
from hpcui.errors import UsageError
from hpcui.request.resources import Resources
from hpcui.schedulers.slurm import SlurmScheduler
from hpcui.transport.base import CommandResult
from tests.canned import CannedTransport, ok
from tests.conftest import fixture_text


def test_scontrol_show_job_of_a_finished_job():
    (d,) = slurm_control.parse_show_job(
        fixture_text("slurm-22.05.8/scontrol_show_job_o_completed.txt")
    )
    assert d.job_id == "3" and d.state is JobState.COMPLETED and d.user == "root"
    assert d.stdout == "/home/alice/.hpcui/jobs/3/3_0_log.out"
    assert d.stderr == "/home/alice/.hpcui/jobs/3/3_0_log.err"
    assert d.work_dir == "/home/alice/project" and d.batch_host == "vm"
    assert d.time_limit_s == 300 and d.dependency == "" and d.batch


def test_scontrol_show_job_of_a_pending_job():
    (d,) = slurm_control.parse_show_job(
        fixture_text("slurm-22.05.8/scontrol_show_job_o_pending.txt")
    )
    assert d.state is JobState.PENDING and d.nodelist == "" and d.reason == "Priority"
    assert d.start_time is not None and d.start_time.hour == 12  # the expected start


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("slurm-%j.out", "slurm-42.out"),
        ("%x-%A_%a.out", "train-40_2.out"),
        ("%4a-%u-%N.log", "0002-alice-node7.log"),
        ("100%%-%j", "100%-42"),
        ("step-%s-task-%t", "step-0-task-0"),
        ("/already/expanded/slurm-42.out", "/already/expanded/slurm-42.out"),
    ],
)
def test_slurm_filename_patterns(pattern, expanded):
    fields = {"j": "42", "J": "42", "x": "train", "A": "40", "a": "2", "u": "alice", "N": "node7"}
    assert slurm_control.expand_pattern(pattern, fields) == expanded


def test_an_array_elements_patterns_and_a_comment_with_spaces():
    line = (
        "JobId=51 ArrayJobId=50 ArrayTaskId=1 JobName=sweep UserId=bob(1002) JobState=RUNNING "
        "Comment=two words here TimeLimit=1-00:00:00 BatchHost=n3 WorkDir=/w "
        "StdOut=/w/%x-%A_%a.out StdErr=/w/%x-%A_%a.err BatchFlag=1"
    )
    (d,) = slurm_control.parse_show_job(line)
    assert d.job_id == "50_1" and d.stdout == "/w/sweep-50_1.out" and d.user == "bob"
    assert d.time_limit_s == 86400
    with pytest.raises(ValueError, match="oneliner"):
        slurm_control.parse_show_job("no pairs here")


def test_control_commands_refuse_what_is_not_a_job_id():
    assert slurm_control.hold_command(["1", "2_3"]) == ["scontrol", "hold", "1,2_3"]
    assert slurm_control.requeue_command(["7"]) == ["scontrol", "requeue", "7"]
    assert slurm_control.time_limit_command("7", "01:30:00")[-1] == "TimeLimit=01:30:00"
    for bad in ("1;rm -rf ~", "$(id)", "", "1 2"):
        with pytest.raises(ValueError):
            slurm_control.hold_command([bad])
    with pytest.raises(ValueError):
        slurm_control.time_limit_command("7", "1h; reboot")
    assert pbs_script.control_command("hold", ["12.pbs01_3"]) == ["qhold", "12[3].pbs01"]
    assert pbs_script.walltime_command("12", 5400) == ["qalter", "-l", "walltime=01:30:00", "12"]
    with pytest.raises(ValueError):
        pbs_script.control_command("release", ["12;id"])


def test_pbs_output_path_without_its_host():
    (job,) = pbs.parse_qstat_json(fixture_text("pbs-pro-19.0/qstat_f_json_running.json"))
    d = _details("12860476", job)
    assert d.stdout.startswith("/storage/liberec3-tul/home/") and ":" not in d.stdout
    assert d.stdout.endswith("swrap_01.o12860476")
    assert d.state is JobState.RUNNING and d.batch_host
    # Keep_Files=n: PBS fills Output_Path only at the end, and the record says so
    assert "Keep_Files=n" in d.log_note and "appears when the job ends" in d.log_note


def test_pbs_direct_write_or_an_ended_job_needs_no_note():
    text = fixture_text("pbs-pro-19.0/qstat_f_json_running.json")
    direct = text.replace('"Keep_Files":"n"', '"Keep_Files":"oed"')  # qsub -k oed
    assert direct != text
    (job,) = pbs.parse_qstat_json(direct)
    assert _details("12860476", job).log_note == ""
    (job,) = pbs.parse_qstat_json(text)
    ended = job.model_copy(update={"state": JobState.COMPLETED})
    assert _details("12860476", ended).log_note == ""


def test_after_ok_is_checked_and_rendered():
    class FakeJob:
        job_id = "1234"

    assert Resources(after_ok=[FakeJob(), "1235_2"]).after_ok == ("1234", "1235_2")
    assert Resources(after_ok="77.pbs01").after_ok == ("77.pbs01",)
    for bad in ("1234;id", "abc", "1234 1235", "--x"):
        with pytest.raises(ValueError):
            Resources(after_ok=[bad])
    with pytest.raises(UsageError, match="job id to wait for"):
        Resources.from_kwargs(after_ok=["x"])
    spec = BatchSpec(folder="/f", token="t", name="n", after_ok=("1", "2_3"))
    assert "#SBATCH --dependency=afterok:1:2_3" in slurm_script.render_script(spec)
    spec = BatchSpec(folder="/f", token="t", name="n", after_ok=("1.pbs01_3",))
    assert "#PBS -W depend=afterok:1[3].pbs01" in pbs_script.render_script(spec, "pbspro")


def test_free_capacity_from_sinfo_nodes_while_a_two_gpu_job_runs():
    nodes = slurm_free.parse_sinfo_nodes(fixture_text("slurm-22.05.8-dev/sinfo_nodes_2gpu_job.txt"))
    assert len(nodes) == 4
    node1 = next(n for n in nodes if n.node == "node1" and n.partition == "gpu")
    assert (node1.state, node1.gpus_total, node1.gpus_used, node1.gpus_free) == ("mixed", 4, 2, 2)
    assert node1.cpus_idle == 7 and node1.mem_alloc_mb == 500
    gpu = next(p for p in slurm_free.free_by_partition(nodes) if p.partition == "gpu")
    assert (gpu.gpus_free, gpu.gpus_total, gpu.max_gpus_one_node) == (6, 8, 4)
    assert (gpu.nodes_idle, gpu.nodes_mixed, gpu.nodes_unavailable) == (1, 1, 0)
    idle = slurm_free.parse_sinfo_nodes(fixture_text("slurm-24.11.5-dev24/sinfo_nodes_idle.txt"))
    assert sum(n.gpus_free for n in idle if n.partition == "gpu") == 8


def test_down_and_drained_nodes_give_nothing_free():
    text = (
        "n1|gpu|drained|0/0/8/8|gpu:h100:4(S:0-1)|gpu:h100:0(IDX:N/A)|16000|0|\n"
        "n2|gpu|down*|0/0/8/8|gpu:4|gpu:0|16000|0|\n"
        "n3|gpu|mixed|4/4/0/8|gpu:a100:2,gpu:v100:2|gpu:a100:1(IDX:0),gpu:v100:0(IDX:N/A)|16000|0|\n"
    )
    n1, n2, n3 = slurm_free.parse_sinfo_nodes(text)
    assert n1.gpus_total == 4 and n1.gpus_free == 0 and not n1.usable
    assert not n2.responding and n2.state == "down" and n2.gpus_free == 0
    assert (n3.gpus_total, n3.gpus_used, n3.gpus_free) == (4, 1, 3)
    (part,) = slurm_free.free_by_partition([n1, n2, n3])
    assert part.nodes_unavailable == 2 and part.gpus_free == 3 and part.cpus_free == 4
    with pytest.raises(ValueError, match=r"expected 8 '\|'-separated fields, got 3"):
        slurm_free.parse_sinfo_nodes("n1|gpu|idle\n")


def test_sshare_and_sprio():
    (share,) = slurm_free.parse_sshare(fixture_text("slurm-22.05.8-dev/sshare_user.txt"))
    assert share.account == "hpcacct" and share.user == "hpcuser" and share.fair_share == 1.0
    (prio,) = slurm_free.parse_sprio(fixture_text("slurm-22.05.8-dev/sprio_pending.txt"))
    assert prio.job_id == "8217" and prio.priority == 11056 and prio.fair_share == 10000
    assert slurm_free.NO_PRIORITY.search(
        "You are not running a supported priority plugin\n(priority/basic).\n"
    )


def test_lumi_allocations():
    rows = allocations.parse_lumi_allocations(
        fixture_text("allocation-constructed/lumi_allocations.txt")
    )
    by = {(r.project, r.resource): r for r in rows}
    gpu = by[("project_465000123", "gpu")]
    assert (gpu.used, gpu.allocated, gpu.left, gpu.unit) == (3071, 5000, 1929, "gpu/hours")
    assert ("project_465000456", "cpu") not in by  # N/A: nothing allocated
    assert by[("project_465000456", "gpu")].left == -200
    with pytest.raises(allocations.AllocationParseError):
        allocations.parse_lumi_allocations("Error: No projects were found\n")


def test_sacct_describes_a_job_the_controller_forgot():
    """Slurm 24.11's sacct keeps StdOut unexpanded and StdErr empty when the job gave no
    --error: the record says what scontrol said while it remembered the job."""
    (d,) = slurm_control.parse_accounting(
        fixture_text("slurm-24.11.5-dev24/sacct_accounting_completed.txt")
    )
    assert d.job_id == "7649" and d.name == "plain-c" and d.user == "hpcuser"
    assert d.state is JobState.COMPLETED and d.reason == "" and d.partition == "cpu"
    assert d.stdout == "/home/hpcuser/anyjob/logs-plain-c/out-7649-hpcuser.txt" == d.stderr
    assert d.work_dir == "/home/hpcuser/anyjob" and d.batch_host == "dev24n1" == d.nodelist
    assert d.time_limit_s == 240 and d.batch
    assert d.submit_time is not None and d.submit_time.isoformat() == "2026-11-24T10:22:11"


@pytest.mark.parametrize(
    ("fixture", "script"),
    [
        ("slurm-24.11.5-dev24/sacct_batch_script.txt", "#!/bin/bash\n"),
        ("slurm-22.05.8-dev/sacct_batch_script.txt", "#!/bin/bash\n"),
        ("slurm-22.05.8-dev/sacct_batch_script_not_stored.txt", ""),  # NONE: not (yet) kept
    ],
)
def test_sacct_batch_script_without_its_banner(fixture, script):
    text = slurm_control.parse_batch_script_accounting(fixture_text(fixture))
    assert text.startswith(script) and "Batch Script for" not in text and "-----" not in text
    if script:
        assert (
            '#SBATCH --output=logs-%x/out-%j-%u.txt\n#SBATCH --time=4\necho "quick out"\n' in text
        )


def _forgotten_job(
    sacct: CommandResult, script: CommandResult
) -> tuple[SlurmScheduler, CannedTransport]:
    unknown = fixture_text("slurm-24.11.5-dev24/scontrol_show_job_unknown.err")
    t = CannedTransport(
        {
            "scontrol show job": ok(err=unknown, rc=1),
            "scontrol write batch_script": ok(
                err=fixture_text("slurm-24.11.5-dev24/scontrol_write_batch_script_unknown.err")
            ),  # exit status 0, as scontrol does
            "sacct --batch-script": script,
            "sacct": sacct,
        },
        strict=True,
    )
    return SlurmScheduler(t), t


def test_a_forgotten_job_falls_back_on_accounting():
    """The glue around the parsers, on the real outputs: scontrol's "Invalid job id" sends
    job_details and batch_script to sacct; what sacct does not know keeps scontrol's
    message (and `write batch_script`'s exit status 0 is no success)."""
    kept = ok(fixture_text("slurm-24.11.5-dev24/sacct_accounting_completed.txt"))
    script = ok(fixture_text("slurm-24.11.5-dev24/sacct_batch_script.txt"))
    slurm, t = _forgotten_job(kept, script)
    assert slurm.job_details("7649").stdout.endswith("/logs-plain-c/out-7649-hpcuser.txt")
    assert slurm.batch_script("7649").startswith("#!/bin/bash\n#SBATCH --job-name=plain-c")
    assert any(c.startswith("env SLURM_TIME_FORMAT=standard sacct -X") for c in t.commands)

    old = ok(err=fixture_text("slurm-22.05.8-dev/sacct_accounting_no_stdout_field.err"), rc=1)
    none = ok(fixture_text("slurm-22.05.8-dev/sacct_batch_script_not_stored.txt"))
    slurm, _ = _forgotten_job(old, none)
    with pytest.raises(UsageError, match="Slurm does not know job 8988"):
        slurm.job_details("8988")
    with pytest.raises(UsageError, match="Slurm does not know job 8988"):
        slurm.batch_script("8988")
    slurm, _ = _forgotten_job(ok(""), ok(""))  # sacct knows nothing of it either
    with pytest.raises(UsageError, match="MinJobAge"):
        slurm.job_details("8988")


def test_the_schedulers_words_for_a_job_that_left_no_result():
    """Slurm's ExitCode and PBS's Exit_status reach JobDetails, and a job that never ran
    is explained in the scheduler's words (the dev-cluster test provokes Slurm's)."""
    from hpcui.backends.end_reasons import scheduler_words

    (done,) = slurm_control.parse_show_job(
        fixture_text("slurm-22.05.8/scontrol_show_job_o_completed.txt")
    )
    assert done.exit_code == "0:0" and scheduler_words(done, "Slurm") == ""
    failed = done.model_copy(update={"reason": "JobLaunchFailure", "exit_code": "0:53"})
    assert scheduler_words(failed, "Slurm") == (
        "Slurm ended it with reason JobLaunchFailure, exit code 0:53: its node could not "
        "launch it (often an output file or working directory it cannot create or write, a "
        "missing executable or a prolog error)"
    )
    node = done.model_copy(update={"reason": "NodeFail", "exit_code": "0:0"})
    assert (
        scheduler_words(node, "Slurm")
        == "Slurm ended it with reason NodeFail: a node of the job failed"
    )
    odd = done.model_copy(update={"reason": "None", "exit_code": "2:0"})
    assert scheduler_words(odd, "Slurm") == "Slurm ended it with exit code 2:0"

    text = fixture_text("pbs-pro-19.0/qstat_f_json_running.json")
    never = text.replace('"job_state":"R"', '"job_state":"F","Exit_status":-1')
    assert never != text
    (job,) = pbs.parse_qstat_json(never)
    d = _details("12860476", job)
    assert d.exit_code == "-1"
    assert "exit code -1: PBS could not start it (JOB_EXEC_FAIL1" in scheduler_words(d, "PBS")


def test_free_lists_partitions_in_one_order_whatever_order_sinfo_gives():
    """Issue 35, small ones: `hpcui free` ordered partitions differently on each call
    (sinfo's node order changes with node states). Default partition first, then by name."""
    lines = fixture_text("slurm-22.05.8-dev/sinfo_nodes_2gpu_job.txt").splitlines()
    orders = set()
    for shift in range(len(lines)):
        nodes = slurm_free.parse_sinfo_nodes("\n".join(lines[shift:] + lines[:shift]) + "\n")
        orders.add(tuple(p.partition for p in slurm_free.free_by_partition(nodes)))
    assert len(orders) == 1
    (order,) = orders
    parts = slurm_free.free_by_partition(slurm_free.parse_sinfo_nodes("\n".join(lines) + "\n"))
    default = [p.partition for p in parts if p.is_default]
    assert list(order) == default + sorted(set(order) - set(default))
