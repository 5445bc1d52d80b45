"""backends.pbs_script (directives, ids, commands) and the PBS adapter on canned outputs."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from hpcui.backends.batch import BatchSpec
from hpcui.backends.job_paths import CALLS_PACK, pack_calls
from hpcui.backends.pbs import script as pbs_script
from hpcui.backends.states import JobState
from hpcui.errors import SchedulerError, UsageError
from hpcui.schedulers.pbs import PbsScheduler
from tests.canned import CannedTransport, ok
from tests.conftest import FIXTURES, ROOT, fixture_text

FOLDER = "/scratch/u/.hpcui/jobs/abc"


def spec(**kw) -> BatchSpec:
    base = dict(folder=FOLDER, token="tok42", name="train")
    return BatchSpec(**(base | kw))


def pbs_lines(script: str) -> list[str]:
    return [line[len("#PBS ") :] for line in script.splitlines() if line.startswith("#PBS ")]


# --- directives ----------------------------------------------------------------------------


def test_two_nodes_four_gpus_with_project_and_queue():
    s = spec(
        nodes=2,
        tasks_per_node=4,
        cpus_per_task=14,
        gpus_per_node=4,
        gpu_directive="ngpus",
        mem_mb=400 * 1024,
        time_s=3 * 3600,
        account="12003456",
        partition="normal",
    )
    assert pbs_lines(pbs_script.render_script(s)) == [
        "-N train",
        "-S /bin/bash",
        "-l select=2:ncpus=56:ngpus=4:mem=409600mb:mpiprocs=4",
        "-l place=scatter",
        "-l walltime=03:00:00",
        "-P 12003456",
        "-q normal",
        "-j oe",
        f"-o {FOLDER}/pbs.log",
        "-v HPCUI_TOKEN=tok42",
    ]


def test_single_node_cpu_job_has_no_gpus_and_no_place():
    lines = pbs_lines(pbs_script.render_script(spec(cpus_per_task=4)))
    assert "-l select=1:ncpus=4:mpiprocs=1" in lines
    assert not [x for x in lines if "place" in x or "ngpus" in x or "walltime" in x]


def test_exclusive_multi_node_is_scatter_excl():
    lines = pbs_lines(pbs_script.render_script(spec(nodes=3, exclusive=True)))
    assert "-l place=scatter:excl" in lines


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(60, "00:01:00"), (61, "00:02:00"), (3600 * 24, "24:00:00"), (120 * 3600, "120:00:00")],
)
def test_walltime_has_hours_past_a_day_and_no_days_field(seconds, text):
    assert pbs_script.format_walltime(seconds) == text
    assert f"-l walltime={text}" in pbs_lines(pbs_script.render_script(spec(time_s=seconds)))


def test_array_directives_pbspro():
    lines = pbs_lines(pbs_script.render_script(spec(array_size=100, array_parallelism=5)))
    assert "-J 0-99" in lines
    assert "-W max_run_subjobs=5" in lines
    assert f"-o {FOLDER}/pbs_^array_index^.log" in lines


def test_array_of_one_uses_a_step_pbs_pro_accepts():
    # chk_Jrange refuses 0-0 (start must be < end); 0-1:2 is exactly one subjob, index 0.
    assert "-J 0-1:2" in pbs_lines(pbs_script.render_script(spec(array_size=1)))


def test_torque_dialect():
    s = spec(nodes=2, tasks_per_node=2, gpus_per_node=2, mem_mb=1000, account="acct")
    lines = pbs_lines(pbs_script.render_script(s, "torque"))
    assert "-l nodes=2:ppn=2:gpus=2" in lines
    assert "-l mem=2000mb" in lines  # Torque's mem is for the whole job
    assert "-A acct" in lines and not [x for x in lines if x.startswith("-P")]
    arr = pbs_lines(pbs_script.render_script(spec(array_size=4, array_parallelism=2), "torque"))
    assert "-t 0-3%2" in arr


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"qos": "debug"}, "no QoS"),
        ({"gpu_type": "a100"}, "GPU-type"),
        ({"constraint": "bigmem"}, "name=value"),
        ({"launcher": "elastic"}, "elastic"),
    ],
)
def test_what_pbs_cannot_express_is_refused_not_dropped(kw, match):
    with pytest.raises(ValueError, match=match):
        pbs_script.render_script(spec(**kw))


# --- Slurm's Torque wrapper: one -l in Torque syntax, a Slurm body ---------------------------

WRAP = "slurm-torque-wrapper"


def test_wrapper_gets_one_torque_resource_line_and_a_slurm_body():
    s = spec(
        nodes=2,
        tasks_per_node=4,
        cpus_per_task=2,
        gpus_per_node=4,
        mem_mb=32 * 1024,
        time_s=3600,
        account="acct",
        partition="gpu",
    )
    text = pbs_script.render_script(s, WRAP)
    assert pbs_lines(text) == [
        "-N train",
        "-l nodes=2:ppn=8:gpus=4,walltime=01:00:00,mem=32768mb",
        "-A acct",
        "-q gpu",
    ]
    assert "select=" not in text and "ngpus" not in text  # what sbatch's PBS reader drops
    assert "#SBATCH --comment=hpcui:tok42" in text.splitlines()
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert "--nodes=2 --ntasks=8 --ntasks-per-node=4 " in srun
    assert "export SRUN_CPUS_PER_TASK=2 " in text  # not ppn's one CPU per task
    assert "PBS_NODEFILE" not in text  # the job is a Slurm job: srun launches


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"qos": "debug"}, "QoS"),
        ({"gpu_type": "a100"}, "GPU type"),
        ({"constraint": "bigmem"}, "constraint"),
        ({"exclusive": True}, "exclusive"),
        ({"array_size": 3}, "array elements"),
        ({"folder": "/home/u/my jobs/x"}, "unquoted"),
        ({"folder": "/home/u/$(reboot)"}, "unquoted"),
        ({"name": "train\nreboot"}, "newline"),  # would be a line of shell code
    ],
)
def test_what_the_wrapper_cannot_say_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        pbs_script.render_script(spec(**kw), WRAP)


def test_wrapper_qsub_puts_the_output_in_the_job_folder():
    assert pbs_script.wrapper_qsub_command(f"{FOLDER}/submission.sh") == [
        "qsub",
        "-j",
        "oe",
        "-o",
        f"{FOLDER}/pbs-%j.log",
        f"{FOLDER}/submission.sh",
    ]
    # hpcui submits from inside the job folder: sbatch resolves the log beside the script
    assert pbs_script.wrapper_qsub_command("submission.sh")[4] == "pbs-%j.log"
    with pytest.raises(ValueError, match="unsafe"):
        pbs_script.wrapper_qsub_command("/x/a b;rm/submission.sh")


def test_wrapper_status_takes_the_end_from_sacct_in_the_same_round_trip():
    """Replays hpcui's real status round trip on the dev cluster's wrapper."""
    wrapper = FIXTURES / "torque-wrappers-22.05.8"
    cmd = (wrapper / "status_round_trip.cmd").read_text().strip()
    assert pbs_script.wrapper_status_command(["3408", "3401", "3409", "3406", "999999"]) == cmd
    t = CannedTransport(
        {"qstat -f": ok((wrapper / "status_round_trip.txt").read_text())}, strict=True
    )
    got = PbsScheduler(t, dialect=WRAP).status(["3401", "3408", "3409", "999999", "12.pbs01"])
    assert got["3401"].state is JobState.COMPLETED and got["3401"].exit_code == 0
    assert got["3408"].state is JobState.COMPLETED
    assert got["3409"].state is JobState.RUNNING and got["3409"].state_raw == "R"
    assert "999999" not in got  # unknown to both: the status service reads result files
    assert "12.pbs01" not in got  # a PBS Pro id from before a config change: left out too
    assert len(t.commands) == 1
    with pytest.raises(ValueError, match="not Slurm job ids"):
        pbs_script.wrapper_status_command(["1; reboot"])


def test_wrapper_status_without_accounting_leaves_ended_jobs_to_the_result_files():
    wrapper = FIXTURES / "torque-wrappers-22.05.8"
    qstat_only = (wrapper / "status_round_trip.txt").read_text().partition("__HPCUI_SACCT__")[0]
    t = CannedTransport({"qstat -f": ok(qstat_only + "__HPCUI_SACCT__\n")}, strict=True)
    got = PbsScheduler(t, dialect=WRAP).status(["3401", "3409"])
    assert "3401" not in got  # C says only "ended": never guessed
    assert got["3409"].state is JobState.RUNNING


def test_user_values_are_quoted():
    text = pbs_script.render_script(spec(env={"A": "x y; rm -rf /"}, python="/opt/my py/python"))
    assert "export A='x y; rm -rf /'" in text
    assert "HPCUI_PYTHON='/opt/my py/python'" in text
    with pytest.raises(ValueError, match="newline"):
        pbs_script.render_script(spec(name="a\nb"))


# --- ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qsub", "base"),
    [
        ("1234.pbs01", "1234.pbs01"),
        ("1234[].pbs01.example.org", "1234.pbs01.example.org"),
        ("77", "77"),
    ],
)
def test_base_id(qsub, base):
    assert pbs_script.base_id(qsub) == base


def test_id_round_trip():
    assert pbs_script.to_pbs_id("1234.pbs01_7") == "1234[7].pbs01"
    assert pbs_script.to_pbs_id("1234.pbs01") == "1234.pbs01"
    assert pbs_script.from_pbs_id("1234[7].pbs01") == "1234.pbs01_7"
    assert pbs_script.from_pbs_id("1234[].pbs01") is None
    assert pbs_script.array_parent("1234.pbs01_7") == "1234[].pbs01"
    assert pbs_script.array_parent("1234.pbs01") is None
    # qstat may print the server's long name where qsub printed the short one
    assert pbs_script.id_key("1234.pbs01_7") == pbs_script.id_key("1234[7].pbs01.example.org")
    assert pbs_script.id_key("1234.pbs01") != pbs_script.id_key("1234[0].pbs01")


def test_status_command_is_one_round_trip_with_parents_for_elements():
    cmd = pbs_script.status_command(["5.s_0", "5.s_1", "6.s"])
    # one qstat per id: OpenPBS 23.06 prints only the first operand's jobs with -F json
    assert cmd == "for j in '5[].s' 6.s; do qstat -x -t -f -F json \"$j\"; done"
    assert pbs_script.status_command(["5.s_0"]) == [
        "qstat",
        "-x",
        "-t",
        "-f",
        "-F",
        "json",
        "5[].s",
    ]
    assert pbs_script.status_command(["5.s_0", "6.s"], "torque") == [
        "qstat",
        "-f",
        "-t",
        "5[].s",
        "6.s",
    ]


def test_qdel_uses_pbs_ids():
    assert pbs_script.qdel_command(["5.s_3", "6.s"]) == ["qdel", "5[3].s", "6.s"]


def test_find_token_in_json_and_torque_text():
    json_text = fixture_text("pbs-pro-19.0/qstat_f_json_running.json").replace(
        '"PBS_NGPUS":0', '"PBS_NGPUS":0,\n"HPCUI_TOKEN":"tok42"'
    )
    assert pbs_script.parse_find_token(json_text, "tok42") == "12860476.meta-pbs.metacentrum.cz"
    assert pbs_script.parse_find_token(json_text, "other") is None
    torque = "Job Id: 9[].srv\n    Variable_List = PBS_O_HOME=/h,HPCUI_TO\n\tKEN=tok42,X=1\n"
    assert pbs_script.parse_find_token(torque, "tok42", "torque") == "9.srv"
    assert pbs_script.parse_find_token(torque, "tok4", "torque") is None
    # PBS Pro's history is asked as text now (one qstat for every id, not one each)
    assert pbs_script.parse_find_token(torque, "tok42", "pbspro") == "9.srv"
    assert "xargs qstat -x -t -f 2>/dev/null)" in pbs_script.find_token_command("pbspro")


# --- the adapter on canned outputs -----------------------------------------------------------


PROBE_PRO = ok("pbs_version = 19.0.0\n")


def test_status_of_array_elements_and_unknown_ids_in_one_call():
    array = (FIXTURES / "pbs-constructed/qstat_tf_json_array.json").read_text()
    t = CannedTransport(
        {"--version": PROBE_PRO, "qstat -x": ok(array, "qstat: Unknown Job Id 99.pbs01\n", 153)}
    )
    sched = PbsScheduler(t)
    ids = ["8300.pbs01_0", "8300.pbs01_1", "8300.pbs01_3", "99.pbs01"]
    got = sched.status(ids)
    assert got["8300.pbs01_0"].state is JobState.COMPLETED
    assert got["8300.pbs01_1"].state is JobState.RUNNING
    assert got["8300.pbs01_3"].state is JobState.PENDING
    assert "99.pbs01" not in got  # unknown: left to the vanished-job resolution
    assert sum("qstat -x" in c for c in t.commands) == 1


def test_status_decodes_exit_status_of_killed_jobs():
    killed = (FIXTURES / "pbs-constructed/qstat_xf_json_killed.json").read_text()
    sched = PbsScheduler(
        CannedTransport({"--version": PROBE_PRO, "qstat -x": ok(killed)}, strict=True)
    )
    got = sched.status(["8123.pbs01", "8124.pbs01", "8125.pbs01"])
    assert got["8123.pbs01"].state is JobState.CANCELLED
    assert "265" in got["8123.pbs01"].state_raw
    assert got["8124.pbs01"].state is JobState.TIMEOUT
    assert got["8125.pbs01"].state is JobState.CANCELLED


def test_real_qstat_failure_raises_scheduler_error():
    t = CannedTransport(
        {
            "--version": PROBE_PRO,
            "qstat -x": ok("", "qstat: cannot connect to server pbs01 (errno=111)", 2),
        }
    )
    with pytest.raises(SchedulerError, match="cannot connect"):
        PbsScheduler(t).status(["1.pbs01"])


def test_wrapper_is_probed_once_and_spoken_to_in_torque_syntax():
    err = (FIXTURES / "pbs-constructed/wrapper-22.05.8_qstat_version.stderr").read_text()
    t = CannedTransport({"--version": ok(err, rc=0)}, strict=True)
    sched = PbsScheduler(t)
    assert "#PBS -l nodes=1:ppn=1" in sched.render_script(spec())
    assert sched.submit_command(f"{FOLDER}/submission.sh")[:5] == [
        "qsub",
        "-j",
        "oe",
        "-o",
        f"{FOLDER}/pbs-%j.log",
    ]
    with pytest.raises(UsageError, match='scheduler = "slurm"'):
        sched.render_script(spec(qos="debug"))
    assert sum("--version" in c for c in t.commands) == 1  # probed once
    assert sched.dialect == WRAP


def test_unknown_qstat_is_a_clear_error():
    t = CannedTransport(
        {
            "--version": ok(
                "bash: qstat: command not found\n__HPCUI_QSUB__\nbash: qsub: command not found\n"
            )
        }
    )
    with pytest.raises(SchedulerError, match="on PATH"):
        PbsScheduler(t).render_script(spec())


def test_parse_submit_maps_array_parent_to_base():
    sched = PbsScheduler(CannedTransport({}, strict=True), dialect="pbspro")
    assert sched.parse_submit("8300[].pbs01\n") == "8300.pbs01"
    with pytest.raises(SchedulerError, match="no job id"):
        sched.parse_submit("qsub: Unknown queue\n")


def test_cancel_ignores_finished_jobs_only():
    t = CannedTransport({"qdel": ok("", "qdel: Job has finished 5.s\n", 35)}, strict=True)
    PbsScheduler(t, dialect="pbspro").cancel(["5.s_2"])
    assert "qdel '5[2].s'" in t.commands[-1] or "qdel 5[2].s" in t.commands[-1]
    t2 = CannedTransport({"qdel": ok("", "qdel: Unauthorized Request 5.s\n", 159)}, strict=True)
    with pytest.raises(SchedulerError, match="Unauthorized"):
        PbsScheduler(t2, dialect="pbspro").cancel(["5.s"])


# --- the rendered script runs: ranks, ids, results (PBS simulated by environment) ---------------


def _probe(x):
    import os as _os

    import submitit

    env = submitit.JobEnvironment()
    return {
        "x": x,
        "job_id": env.job_id,
        "rank": env.global_rank,
        "local_rank": env.local_rank,
        "node": env.node,
        "world": env.num_tasks,
        "hosts": list(env.hostnames),
        "hpcui_rank": _os.environ.get("HPCUI_RANK"),
    }


def run_on_nodes(tmp_path: Path, folder: Path, nodes: str, timeout: float, **env: str):
    """Run the job folder's submission.sh as PBS would on the first node: $PBS_NODEFILE
    holds `nodes`, and HPCUI_PBS_RSH is a stand-in for pbs_tmrsh that runs here."""
    nodefile = tmp_path / "nodes"
    nodefile.write_text(nodes)
    rsh = tmp_path / "rsh"
    rsh.write_text('#!/bin/sh\nshift\nexec "$@"\n')
    rsh.chmod(0o755)
    full = dict(os.environ, PBS_NODEFILE=str(nodefile), HPCUI_PBS_RSH=str(rsh), **env)
    return subprocess.run(["bash", str(folder / "submission.sh")], env=full, timeout=timeout)


def test_script_runs_one_process_per_task_on_every_node(tmp_path: Path):
    """2 nodes x 2 tasks, array element 1: four results with the ranks hpcui.distributed reads.

    The sister node is started through HPCUI_PBS_RSH (a stand-in for pbs_tmrsh that runs
    the command here), so the whole launcher path runs, not only node 0.
    """
    folder = tmp_path / "job"
    folder.mkdir()
    from submitit.core.utils import DelayedSubmission

    calls = [cloudpickle.dumps(DelayedSubmission(_probe, i)) for i in range(2)]
    (folder / CALLS_PACK).write_bytes(pack_calls(calls))
    s = spec(
        folder=str(folder),
        nodes=2,
        tasks_per_node=2,
        array_size=2,
        python=sys.executable,
        pythonpath=(str(ROOT),),
    )
    (folder / "submission.sh").write_text(pbs_script.render_script(s))
    proc = run_on_nodes(
        tmp_path,
        folder,
        "nodeA\nnodeA\nnodeB\nnodeB\n",
        timeout=120,
        PBS_JOBID="77[1].srv",
        PBS_ARRAY_INDEX="1",
    )
    assert proc.returncode == 0
    results = [pickle.loads((folder / f"77.srv_1_{r}_result.pkl").read_bytes()) for r in range(4)]
    assert [kind for kind, _ in results] == ["success"] * 4
    values = [v for _, v in results]
    assert {v["job_id"] for v in values} == {"77.srv_1"}
    assert [(v["rank"], v["node"], v["local_rank"]) for v in values] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
    ]
    assert {v["world"] for v in values} == {4}
    assert values[0]["hosts"] == ["nodeA", "nodeB"]
    assert values[3]["hpcui_rank"] == "3"
    # element 1's call, written from the pack by its first task: one file, not a link
    assert (folder / "77.srv_1_submitted.pkl").read_bytes() == calls[1]


def test_torchrun_on_pbs_one_agent_per_node_ranks_for_submitit(tmp_path: Path):
    """2 nodes x 2 GPUs with launcher="torchrun": the node launcher starts one agent per
    node (the sister through the HPCUI_PBS_RSH stand-in), each becomes real torchrun
    (c10d rendezvous), and its 2 workers run stock submitit under hpcui's PBS job
    environment: four results, with torchrun's ranks seen by submitit."""
    from submitit.core.utils import DelayedSubmission

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "task.pkl").write_bytes(cloudpickle.dumps(DelayedSubmission(_probe, 7)))
    s = spec(
        folder=str(folder),
        nodes=2,
        tasks_per_node=1,
        cpus_per_task=2,
        gpus_per_node=2,
        launcher="torchrun",
        python=sys.executable,
        pythonpath=(str(ROOT),),
    )
    text = pbs_script.render_script(s)
    assert "-m hpcui.node.torchrun agent" in text and "HPCUI_NPROC_PER_NODE=2" in text
    (folder / "submission.sh").write_text(text)
    proc = run_on_nodes(
        tmp_path,
        folder,
        "nodeA\nnodeB\n",
        timeout=180,
        PBS_JOBID="78.srv",
        HPCUI_MASTER_ADDR="127.0.0.1",  # both "nodes" are this machine
    )
    logs = "".join(p.read_text() for p in sorted(folder.glob("*_log.*")))
    assert proc.returncode == 0, logs[-3000:]
    results = [pickle.loads((folder / f"78.srv_{r}_result.pkl").read_bytes()) for r in range(4)]
    assert [kind for kind, _ in results] == ["success"] * 4, logs[-3000:]
    values = [v for _, v in results]
    assert [(v["rank"], v["local_rank"], v["world"]) for v in values] == [
        (0, 0, 4),
        (1, 1, 4),
        (2, 0, 4),
        (3, 1, 4),
    ]
    assert {v["node"] for v in values} == {0, 1} and values[0]["job_id"] == "78.srv"
    assert values[0]["hosts"] == ["nodeA", "nodeB"]
    assert (folder / "78.srv_3_log.out").exists()  # each worker logs as its rank


def test_failing_task_makes_the_job_exit_nonzero(tmp_path: Path):
    from submitit.core.utils import DelayedSubmission

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "task.pkl").write_bytes(cloudpickle.dumps(DelayedSubmission(int, "not a number")))
    s = spec(folder=str(folder), python=sys.executable, pythonpath=(str(ROOT),))
    (folder / "submission.sh").write_text(pbs_script.render_script(s))
    env = dict(os.environ, PBS_JOBID="88.srv")
    env.pop("PBS_NODEFILE", None)
    env.pop("PBS_ARRAY_INDEX", None)
    proc = subprocess.run(["bash", str(folder / "submission.sh")], env=env, timeout=120)
    assert proc.returncode != 0
    kind, tb = pickle.loads((folder / "88.srv_0_result.pkl").read_bytes())
    assert kind == "error" and "ValueError" in tb
    assert "ValueError" in (folder / "88.srv_0_log.err").read_text()


def test_partitions_are_qstat_q_queues():
    table = (FIXTURES / "pbs-constructed/pbspro_qstat_Q_alcf.txt").read_text()
    t = CannedTransport({"qstat -Q": ok(table)}, strict=True)
    parts = PbsScheduler(t, dialect="pbspro").partitions()
    assert [p.partition for p in parts][:4] == ["run_next", "debug", "debug-scaling", "prod"]
    t2 = CannedTransport({"qstat -Q": ok("no queue table here\n")}, strict=True)
    with pytest.raises(SchedulerError, match="cannot read"):
        PbsScheduler(t2, dialect="pbspro").partitions()


def test_user_jobs_command_per_dialect():
    from hpcui.backends.pbs.script import user_jobs_command

    pro = user_jobs_command("pbspro", history=True)  # one text qstat for all: not one each
    assert "xargs qstat -x -t -f 2>/dev/null)" in pro  # text first, the JSON loop if none
    assert 'else for j in $ids; do qstat -x -t -f -F json "$j"; done; fi' in pro
    live = user_jobs_command("pbspro")
    assert "-x" not in live and 'for j in $ids; do qstat -t -f -F json "$j"; done' in live
    torque = user_jobs_command("torque", history=True)  # Torque keeps no -x history
    assert "-x" not in torque and torque.endswith("qstat -t -f $ids")
