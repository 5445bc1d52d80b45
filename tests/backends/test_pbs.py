"""backends.pbs against verbatim PBS Pro / Torque / Slurm-wrapper outputs and the
constructed fixtures described in tests/fixtures/pbs-constructed/SOURCES.md."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from hpcui.backends.pbs.queues import parse_qstat_q
from hpcui.backends.pbs.status import (
    PbsJobId,
    PbsParseError,
    decode_exit_status,
    detect_pbs_dialect,
    parse_pbs_id,
    parse_qstat_json,
    parse_qstat_table,
    parse_qsub_output,
    parse_torque_qstat_f,
    pbs_id_matches,
    pbs_state,
)
from hpcui.backends.states import JobState

FIXTURES = Path(__file__).parent.parent / "fixtures"
BUILT = FIXTURES / "pbs-constructed"
WRAPPER = FIXTURES / "torque-wrappers-22.05.8"


def read(path: Path) -> str:
    return path.read_text()


def by_id(jobs):
    return {job.job_id: job for job in jobs}


# --- verbatim outputs ----------------------------------------------------------------


def test_pbspro_19_running_json():
    [job] = parse_qstat_json(read(FIXTURES / "pbs-pro-19.0/qstat_f_json_running.json"))
    assert job.job_id == "12860476.meta-pbs.metacentrum.cz"
    assert (job.name, job.owner, job.queue) == ("swrap_01", "jan_brezina", "charon_2h")
    assert (job.state, job.state_raw) == (JobState.RUNNING, "R")
    assert job.exit_status is job.exit_code is job.signal is None
    assert job.resources_requested["select"] == "2:ncpus=2:mem=4gb:mpiprocs=2:ompthreads=1"
    assert job.resources_requested["mpiprocs"] == "4"  # JSON ints become strings
    assert job.resources_used == {}
    assert job.exec_host == "charon24/0*2+charon21/0*2"
    assert job.nodes == ["charon24", "charon21"]
    assert (job.walltime_limit_s, job.walltime_used_s) == (60, None)
    assert job.ctime == datetime(2022, 10, 4, 21, 23, 20)
    assert job.stime == job.mtime == datetime(2022, 10, 4, 21, 23, 33)
    assert job.comment.startswith("Job run at Tue Oct 04 at 21:23 on (charon24")
    assert job.array_index is None


def test_torque_6_completed():
    [job] = parse_torque_qstat_f(read(FIXTURES / "torque-6/qstat_f_completed.txt"))
    assert (job.job_id, job.name, job.owner) == ("1.server.cluster.org", "test.sh", "vagrant")
    assert (job.queue, job.state_raw, job.state) == ("batch", "C", JobState.COMPLETED)
    assert (job.exit_status, job.exit_code, job.signal) == (0, 0, None)
    assert job.resources_requested == {"walltime": "00:10:00", "nodes": "1", "nodect": "1"}
    assert job.resources_used["mem"] == "780kb"
    assert job.nodes == ["server.cluster.org"]
    assert (job.walltime_limit_s, job.walltime_used_s) == (600, 0)
    assert job.stime == datetime(2017, 3, 19, 17, 39, 12)  # Torque's start_time


def test_slurm_wrapper_qstat_f():
    [job] = parse_torque_qstat_f(read(WRAPPER / "qstat_f_5.txt"))
    assert (job.job_id, job.name, job.owner, job.queue) == ("5", "submitit", "root", "debug")
    assert (job.state, job.state_raw) == (JobState.PENDING, "Q")
    assert job.resources_requested == {"walltime": "00:05:00", "nodect": "1", "ncpus": "1"}
    assert job.walltime_limit_s == 300
    assert job.nodes == []
    # The wrapper prints Slurm's submit/start/end as qtime/mtime/ctime.
    assert job.ctime == job.qtime == datetime(2026, 11, 22, 11, 3, 2)
    assert job.stime == datetime(2026, 11, 22, 12, 49)
    assert job.mtime is None


def test_slurm_wrapper_plain_table():
    jobs = parse_qstat_table(read(WRAPPER / "qstat.txt"), dialect="slurm-torque-wrapper")
    assert len(jobs) == 107
    first, queued = jobs[0], by_id(jobs)["5"]
    assert (first.job_id, first.name, first.owner, first.queue) == ("1", "wrap", "root", "debug")
    assert (first.state_raw, first.state) == ("C", JobState.UNKNOWN)  # no exit status here
    assert (queued.state_raw, queued.state) == ("Q", JobState.PENDING)


def test_slurm_wrapper_alt_table():
    jobs = by_id(parse_qstat_table(read(WRAPPER / "qstat_a.txt"), dialect="slurm-torque-wrapper"))
    assert len(jobs) == 107
    job = jobs["3"]
    assert (job.name, job.owner, job.queue, job.state) == (
        "submitit",
        "root",
        "debug",
        JobState.UNKNOWN,
    )
    assert job.resources_requested == {"nodect": "1", "ncpus": "1"}
    assert (job.walltime_limit_s, job.walltime_used_s) == (300, 0)
    assert jobs["1"].walltime_limit_s is None  # "71582": the wrapper's cut-off "unlimited"
    assert jobs["4"].state is JobState.PENDING


def test_pbspro_alt_table_before_mixed_json():
    text = read(BUILT / "qstat_u_f_json_mixed.txt")
    [job] = parse_qstat_table(text)
    assert (job.job_id, job.owner, job.queue, job.name) == ("2000.VMa", "amehm5", "workq", "STDIN")
    assert (job.state, job.resources_requested) == (JobState.RUNNING, {"nodect": "1", "ncpus": "1"})
    assert (job.walltime_limit_s, job.walltime_used_s) == (None, 25 * 3600 + 26 * 60)
    assert parse_qstat_json(text) == []  # the JSON after the table has no Jobs key


def test_torque_continuation_lines_and_negative_exit():
    [job] = parse_torque_qstat_f(read(BUILT / "torque-3.0.5_qstat_f_exit_-1.txt"))
    assert (job.job_id, job.state_raw, job.exit_status) == ("179.host", "C", -1)
    assert (job.state, job.exit_code, job.signal) == (JobState.FAILED, None, None)
    assert job.resources_requested == {"ncpus": "2", "nodect": "1", "nodes": "node1"}
    assert job.nodes == ["node1"]


def test_text_exit_status_spelling_picks_the_numbering():
    # Constructed: the same block as PBS Pro (Exit_status) and as Torque (exit_status).
    block = "Job Id: 7.pbs01\n    job_state = F\n    {} = -29\n"
    [pbspro] = parse_torque_qstat_f(block.format("Exit_status"))
    [torque] = parse_torque_qstat_f(block.format("exit_status"))
    assert (pbspro.state, torque.state) == (JobState.TIMEOUT, JobState.FAILED)


# --- constructed PBS Pro outputs -------------------------------------------------------


def test_finished_job():
    [job] = parse_qstat_json(read(BUILT / "qstat_xf_json_finished.json"))
    assert (job.job_id, job.owner, job.queue) == ("0.725ccdf1a5fb", "pbsuser", "workq")
    assert (job.state_raw, job.state) == ("F", JobState.COMPLETED)
    assert (job.exit_status, job.exit_code, job.signal) == (0, 0, None)
    assert job.resources_used["mem"] == "7060kb"
    assert job.resources_requested["select"] == "1:ncpus=1"
    assert job.nodes == ["725ccdf1a5fb"]
    assert job.comment.endswith("and finished")


def test_killed_timeout_and_deleted_jobs():
    jobs = by_id(parse_qstat_json(read(BUILT / "qstat_xf_json_killed.json")))
    killed = jobs["8123.pbs01"]
    assert (killed.state, killed.exit_status, killed.exit_code, killed.signal) == (
        JobState.CANCELLED,
        265,
        None,
        9,
    )
    assert killed.resources_requested["ngpus"] == "2"
    assert killed.nodes == ["dgx-a07"]
    assert (killed.walltime_limit_s, killed.walltime_used_s) == (3 * 3600, 41 * 60 + 7)
    timeout = jobs["8124.pbs01"]  # 271 after the whole walltime: a walltime kill
    assert (timeout.state, timeout.signal) == (JobState.TIMEOUT, 15)
    assert timeout.nodes == ["dgx-b01", "dgx-b02"]
    deleted = jobs["8125.pbs01"]  # qdel while queued: F without Exit_status
    assert (deleted.state, deleted.exit_status, deleted.nodes) == (JobState.CANCELLED, None, [])
    assert deleted.stime is None


def test_queued_and_held_jobs():
    jobs = by_id(parse_qstat_json(read(BUILT / "qstat_f_json_queued_held.json")))
    assert (jobs["8200.pbs01"].state, jobs["8200.pbs01"].owner) == (JobState.PENDING, "bob")
    assert jobs["8200.pbs01"].comment.startswith("Not Running: Insufficient amount")
    held = jobs["8201.pbs01"]
    assert (held.state_raw, held.state, held.exec_host) == ("H", JobState.PENDING, None)


def test_array_parent_and_subjobs():
    jobs = by_id(parse_qstat_json(read(BUILT / "qstat_tf_json_array.json")))
    parent = jobs["8300[].pbs01"]
    assert (parent.state_raw, parent.state, parent.array_index) == ("B", JobState.RUNNING, None)
    assert parse_pbs_id(parent.job_id).is_array_parent
    done = jobs["8300[0].pbs01"]
    assert (done.state_raw, done.state, done.array_index) == ("X", JobState.COMPLETED, 0)
    assert jobs["8300[2].pbs01"].nodes == ["dgx-a04"]
    assert (jobs["8300[3].pbs01"].state, jobs["8300[3].pbs01"].array_index) == (JobState.PENDING, 3)


def test_no_jobs_key_means_no_jobs():
    assert parse_qstat_json(read(BUILT / "qstat_f_json_no_jobs.json")) == []
    assert parse_qstat_json("") == []


def test_invalid_json_is_read_leniently():
    [job] = parse_qstat_json(read(BUILT / "qstat_f_json_bad_values.json"))
    assert (job.job_id, job.owner, job.state) == ("8400.pbs01", "dave", JobState.RUNNING)
    assert job.nodes == ["dgx-a09"]
    assert job.walltime_limit_s == 3600
    assert job.comment.endswith('"quoted" by a hook')


def test_bad_escapes_alone_are_repaired():
    text = '{"Jobs":{"1.s":{"job_state":"Q","Variable_List":{"A":"ab\\,c","B":"\\\'x\\\'"}}}}'
    [job] = parse_qstat_json(text)
    assert (job.job_id, job.state) == ("1.s", JobState.PENDING)


# --- state letters and exit statuses ---------------------------------------------------


@pytest.mark.parametrize(
    ("letter", "state"),
    [
        ("B", JobState.RUNNING),
        ("E", JobState.COMPLETING),
        ("H", JobState.PENDING),
        ("M", JobState.UNKNOWN),
        ("Q", JobState.PENDING),
        ("R", JobState.RUNNING),
        ("S", JobState.SUSPENDED),
        ("T", JobState.PENDING),
        ("U", JobState.SUSPENDED),
        ("W", JobState.PENDING),
        ("F", JobState.CANCELLED),  # finished without an exit status: never ran
        ("X", JobState.CANCELLED),
        ("C", JobState.CANCELLED),
        ("Z", JobState.UNKNOWN),
    ],
)
def test_state_letters(letter, state):
    assert pbs_state(letter) is state


def test_finished_letters_use_the_exit_status():
    assert pbs_state("F", 0) is JobState.COMPLETED
    assert pbs_state("X", 1) is JobState.FAILED
    assert pbs_state("C", -11, dialect="torque") is JobState.TIMEOUT


def test_wrapper_letters():
    assert pbs_state("C", dialect="slurm-torque-wrapper") is JobState.UNKNOWN
    assert pbs_state("U", dialect="slurm-torque-wrapper") is JobState.UNKNOWN
    assert pbs_state("S", dialect="slurm-torque-wrapper") is JobState.SUSPENDED


@pytest.mark.parametrize(
    ("code", "dialect", "expected"),
    [
        (0, "pbspro", (JobState.COMPLETED, 0, None)),
        (1, "pbspro", (JobState.FAILED, 1, None)),
        (127, "pbspro", (JobState.FAILED, 127, None)),
        (137, "pbspro", (JobState.FAILED, 137, 9)),  # shell: a child died of SIGKILL
        (143, "pbspro", (JobState.FAILED, 143, 15)),
        (265, "pbspro", (JobState.CANCELLED, None, 9)),
        (271, "pbspro", (JobState.CANCELLED, None, 15)),
        (267, "pbspro", (JobState.FAILED, None, 11)),  # SIGSEGV: a crash
        (-1, "pbspro", (JobState.FAILED, None, None)),
        (-3, "pbspro", (JobState.FAILED, None, None)),
        (-4, "pbspro", (JobState.NODE_FAIL, None, None)),
        (-12, "pbspro", (JobState.PREEMPTED, None, None)),
        (-20, "pbspro", (JobState.NODE_FAIL, None, None)),
        (-27, "pbspro", (JobState.OUT_OF_MEMORY, None, None)),
        (-29, "pbspro", (JobState.TIMEOUT, None, None)),
        (-999, "pbspro", (JobState.FAILED, None, None)),
        (-10, "pbspro", (JobState.FAILED, None, None)),  # FAILUID on PBS Pro ...
        (-10, "torque", (JobState.OUT_OF_MEMORY, None, None)),  # ... memory on Torque
        (-11, "torque", (JobState.TIMEOUT, None, None)),
        (-12, "torque", (JobState.TIMEOUT, None, None)),
    ],
)
def test_decode_exit_status(code, dialect, expected):
    assert decode_exit_status(code, dialect=dialect) == expected


# --- ids -------------------------------------------------------------------------------


def test_parse_ids():
    assert parse_pbs_id("1234.server") == PbsJobId(seq=1234, server="server")
    assert parse_pbs_id("1234[].server") == PbsJobId(
        seq=1234, server="server", is_array_parent=True
    )
    assert parse_pbs_id("1234[7].pbs.example.org") == PbsJobId(
        seq=1234, server="pbs.example.org", array_index=7
    )
    assert parse_pbs_id("1234") == PbsJobId(seq=1234)
    with pytest.raises(ValueError, match="not a PBS job id"):
        parse_pbs_id("Job id")


@pytest.mark.parametrize(
    ("full", "shown", "same"),
    [
        ("12860476.meta-pbs.metacentrum.cz", "12860476.meta-pb*", True),
        ("1234567.pbs01.example.org", "1234567.pbs01*", True),
        ("1234.server.cluster.org", "1234.server", True),  # Torque's short host
        ("1234.server", "1234.server.cluster.org", True),
        ("1234.server", "1234", True),
        ("5", "5", True),  # Slurm's wrapper
        ("1234.server", "123", False),
        ("1234.server", "12345.server", False),
        ("1234.server", "1234.other", False),
        ("1234[7].server", "1234[].server", False),
        ("1234[].server", "1234[].server", True),
        ("1234.server", "1235.ser*", False),
        ("1234.server", "*", False),
    ],
)
def test_id_matching(full, shown, same):
    assert pbs_id_matches(full, shown) is same


def test_qsub_output():
    assert parse_qsub_output("1234.pbs01\n") == "1234.pbs01"
    assert parse_qsub_output("Site banner\n8300[].pbs01\n") == "8300[].pbs01"
    assert parse_qsub_output("42\n") == "42"  # Slurm's wrapper
    with pytest.raises(ValueError, match="There was an error running the Slurm sbatch"):
        parse_qsub_output("There was an error running the Slurm sbatch command.\n")


# --- dialect detection -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("qstat_version", "dialect"),
    [
        ("pbs_version = 18.2.3.20181206140456\n", "pbspro"),
        ("pbs_version = PBSPro_11.1.0.111761\n", "pbspro"),
        ("Version: 6.1.2\nCommit: 0123abc\n", "torque"),
        ("version: 2.4.16\n", "torque"),
        (read(BUILT / "wrapper-22.05.8_qstat_version.stderr"), "slurm-torque-wrapper"),
        (read(BUILT / "wrapper-22.05.8_qstat_version_noconf.stderr"), "slurm-torque-wrapper"),
    ],
)
def test_detect_from_qstat_version(qstat_version, dialect):
    assert detect_pbs_dialect(qstat_version) == dialect


def test_detect_from_qsub_help():
    assert detect_pbs_dialect(None, read(BUILT / "pbspro-14.1.2_qsub_help.txt")) == "pbspro"
    for name in ("qsub_help.stdout", "qsub_version.stderr", "qstat_help.stdout"):
        text = read(BUILT / f"wrapper-22.05.8_{name}")
        assert detect_pbs_dialect(None, text) == "slurm-torque-wrapper"


def test_detect_refuses_to_guess():
    with pytest.raises(ValueError, match="set the profile's PBS dialect"):
        detect_pbs_dialect("bash: qstat: command not found", None)
    with pytest.raises(ValueError):
        detect_pbs_dialect(None, None)


# --- qstat -Q: queues ------------------------------------------------------------------------


def test_qstat_q_pbspro_with_routing_and_stopped_queues():
    queues = {q.partition: q for q in parse_qstat_q(read(BUILT / "pbspro_qstat_Q_alcf.txt"))}
    assert len(queues) == 28
    assert queues["debug"].jobs_queued == 2 and queues["debug"].jobs_running == 13
    assert queues["debug"].avail == "up" and queues["debug"].kind == "exec"
    assert queues["prod"].kind == "route"  # `Rou*`: PBS Pro cut the word
    assert queues["R6138500"].avail == "inact"  # enabled, not started: jobs wait
    assert queues["debug"].nodes_total is None  # qstat -Q does not count nodes


def test_qstat_q_pbspro_exec_type_and_counts():
    queues = parse_qstat_q(read(BUILT / "pbspro_qstat_Q_thin.txt"))
    assert [(q.partition, q.jobs_queued, q.jobs_running, q.kind) for q in queues] == [
        ("gpu", 0, 1, "exec"),
        ("all", 0, 0, "exec"),
        ("fat", 0, 0, "exec"),
        ("thin", 95, 16, "exec"),
        ("dssc", 0, 0, "exec"),
    ]


def test_qstat_q_slurm_wrapper_unknown_counts():
    queues = parse_qstat_q(read(WRAPPER / "qstat_Q.txt"))
    assert [(q.partition, q.avail, q.kind, q.jobs_queued) for q in queues] == [
        ("cpu", "up", "exec", None),
        ("gpu", "up", "exec", None),
    ]


def test_qstat_q_refuses_text_without_its_header():
    with pytest.raises(ValueError, match="header"):
        parse_qstat_q("qstat: cannot connect to server pbs01 (errno=111)\n")
    assert parse_qstat_q(read(WRAPPER / "qstat_Q.txt").split("cpu")[0]) == []


# --- what is not qstat's layout is refused, never read as "no jobs" -------------------


def _as_site_variant(text: str) -> str:
    """The Torque 6 capture as a site's modified qstat prints it (issue 19): ``Job:`` for
    ``Job Id:`` — a layout hpcui does not know, so it must not become "no jobs"."""
    return text.replace("Job Id:", "Job:")


def test_an_unknown_qstat_f_layout_is_an_error_not_no_jobs():
    variant = _as_site_variant(read(FIXTURES / "torque-6" / "qstat_f_completed.txt"))
    with pytest.raises(PbsParseError, match=r"cannot read as qstat -f job blocks.*'Job: "):
        parse_torque_qstat_f(variant)
    assert parse_torque_qstat_f("") == [] and parse_torque_qstat_f("\n") == []


@pytest.mark.parametrize(
    "text",
    [
        "qstat: option -F not recognised\nusage: qstat [-f] [job_id...]\n",  # text, not JSON
        '{"error": "server busy"}\n',  # JSON, but not PBS's
    ],
)
def test_json_that_is_not_pbs_json_is_an_error(text):
    with pytest.raises(PbsParseError, match="qstat -F json"):
        parse_qstat_json(text)


def test_epoch_prefixed_times_read_their_ctime_part():
    text = read(FIXTURES / "torque-6" / "qstat_f_completed.txt")
    [plain] = parse_torque_qstat_f(text)
    value = "Sun Mar 19 17:39:12 2017"  # its start_time
    assert f"start_time = {value}" in text
    [variant] = parse_torque_qstat_f(text.replace(value, f"1489941552 ({value})"))
    assert variant.stime == plain.stime is not None
