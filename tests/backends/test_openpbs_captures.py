"""Every OpenPBS 23.06 output captured on the dev cluster's real PBS site (issue 31) parses
right: qstat -f -F json of jobs in each state, an array's parent and subjobs, the first-id
bug of several ids, qstat -Q, pbsnodes -a -F json, and qsub's refusals with hpcui's advice.
Files and the command behind each: tests/fixtures/openpbs-23.06/COMMANDS.md (written by
scripts/capture_pbs_fixtures.py). The PBS Pro 19 captures keep their own tests."""

from __future__ import annotations

import pytest

from hpcui.backends.pbs import nodes as pbs_nodes
from hpcui.backends.pbs import queues as pbs_queues
from hpcui.backends.pbs import script as pbs_script
from hpcui.backends.pbs import status as pbs
from hpcui.backends.states import JobState
from tests.conftest import fixture_text

DIR = "openpbs-23.06"


def one(name: str):
    (job,) = pbs.parse_qstat_json(fixture_text(f"{DIR}/{name}"))
    return job


@pytest.mark.parametrize(
    ("name", "state", "raw", "exit_status"),
    [
        ("qstat_f_json_queued.json", JobState.PENDING, "Q", None),
        ("qstat_f_json_running.json", JobState.RUNNING, "R", None),
        ("qstat_f_json_held.json", JobState.PENDING, "H", None),
        ("qstat_x_f_json_finished.json", JobState.COMPLETED, "F", 0),
        ("qstat_x_f_json_failed.json", JobState.FAILED, "F", 3),
        ("qstat_x_f_json_deleted.json", JobState.CANCELLED, "F", 271),
    ],
)
def test_a_job_in_each_state(name, state, raw, exit_status):
    job = one(name)
    assert (job.state, job.state_raw, job.exit_status) == (state, raw, exit_status)
    assert job.job_id.endswith(".pbs-head") and job.owner == "hpcuser"
    assert job.resources_requested["walltime"] == "00:05:00"
    assert job.output_path and job.output_path.startswith("/tmp/") and ":" not in job.output_path


def test_the_running_job_names_its_two_hosts():
    job = one("qstat_f_json_running.json")
    assert job.nodes == ["pbs-n1", "pbs-n2"] and job.queue == "normal"
    assert job.resources_requested["select"] == "2:ncpus=1:ngpus=4"


def test_an_arrays_parent_and_subjobs():
    jobs = pbs.parse_qstat_json(fixture_text(f"{DIR}/qstat_t_f_json_array.json"))
    ids = [j.job_id.split(".")[0] for j in jobs]
    number = ids[0].split("[")[0]
    assert ids == [f"{number}[]", *(f"{number}[{i}]" for i in range(4))]
    assert jobs[0].array_index is None and [j.array_index for j in jobs[1:]] == [0, 1, 2, 3]
    assert jobs[0].state_raw == "B"  # the parent of a begun array
    assert {j.state for j in jobs[1:]} <= {JobState.RUNNING, JobState.PENDING}


def test_several_ids_print_only_the_first_and_hpcui_asks_one_each():
    """OpenPBS 23.06: `qstat -f -F json A B` lists A alone (src/cmds/qstat.c): the reason
    status_command runs one qstat per id, whose documents parse_qstat_json reads together."""
    text = fixture_text(f"{DIR}/qstat_f_json_two_ids.json")
    assert len(pbs.parse_qstat_json(text)) == 1
    both = fixture_text(f"{DIR}/qstat_f_json_queued.json") + fixture_text(
        f"{DIR}/qstat_f_json_held.json"
    )
    assert [j.state_raw for j in pbs.parse_qstat_json(both)] == ["Q", "H"]
    assert pbs_script.status_command(["1.pbs-head", "2.pbs-head"]).startswith("for j in ")


def test_the_queue_table():
    queues = {q.partition: q for q in pbs_queues.parse_qstat_q(fixture_text(f"{DIR}/qstat_Q.txt"))}
    assert set(queues) == {"normal", "ai"}
    assert queues["normal"].avail == "up" and queues["normal"].kind == "exec"
    assert queues["normal"].jobs_running == 5 and queues["normal"].jobs_queued == 1


def test_pbsnodes_free_per_queue_and_an_offline_host_counted_out():
    from hpcui.sitestate.standing import FreeReport

    busy = pbs_nodes.parse_pbsnodes_json(
        fixture_text(f"{DIR}/pbsnodes_a_json_busy.json"), ["normal", "ai"], "normal"
    )
    assert {(n.node, n.partition) for n in busy} == {
        (h, q) for h in ("pbs-n1", "pbs-n2") for q in ("normal", "ai")
    }
    n1 = next(n for n in busy if n.node == "pbs-n1")
    assert (n1.cpus_total, n1.cpus_idle, n1.gpus_total, n1.gpus_used) == (8, 3, 4, 4)
    assert n1.state == "mixed" and n1.mem_mb == 16384
    offline = pbs_nodes.parse_pbsnodes_json(
        fixture_text(f"{DIR}/pbsnodes_a_json_offline.json"), ["normal"], "normal"
    )
    report = FreeReport.of(offline)
    (normal,) = report.partitions
    assert normal.is_default and normal.nodes_total == 2 and normal.nodes_unavailable == 1
    assert (normal.gpus_free, normal.cpus_free, normal.max_gpus_one_node) == (4, 8, 4)


def test_the_default_queue_comes_from_the_server():
    text = (
        fixture_text(f"{DIR}/pbsnodes_a_json_busy.json")
        + "@@hpcui-queues@@\n"
        + fixture_text(f"{DIR}/qstat_Q.txt")
        + "@@hpcui-server@@\n"
        + fixture_text(f"{DIR}/qstat_Bf_json.json")
    )
    nodes = pbs_nodes.parse_free(text)
    assert {n.partition for n in nodes if n.is_default} == {"normal"}


@pytest.mark.parametrize(
    ("name", "advice"),
    [
        ("qsub_unknown_queue.txt", "`hpcui partitions` lists"),
        ("qsub_too_many_ngpus.txt", "over a limit of the queue or the server"),
        ("qsub_walltime_over_queue.txt", "over a limit of the queue or the server"),
        ("qsub_bad_select.txt", "A resource value is malformed"),
    ],
)
def test_qsubs_refusals_get_what_to_change(name, advice):
    said = fixture_text(f"{DIR}/{name}").strip()
    assert said.startswith("qsub: ")
    assert advice in pbs_script.qsub_advice(said)
