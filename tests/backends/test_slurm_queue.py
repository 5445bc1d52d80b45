from datetime import datetime
from pathlib import Path

import pytest

from hpcui.backends.scheduler_text import parse_duration, parse_mem
from hpcui.backends.slurm.accounting import SACCT_FIELDS, parse_sacct, sacct_command
from hpcui.backends.slurm.fields import parse_exit_code, parse_timestamp, slurm_state
from hpcui.backends.slurm.partitions import SINFO_FIELDS, parse_sinfo, sinfo_command
from hpcui.backends.slurm.queue import SQUEUE_FIELDS, parse_squeue, squeue_command
from hpcui.backends.states import JobState

FIXTURES = Path(__file__).parents[1] / "fixtures"
REAL = FIXTURES / "slurm-22.05.8"
MADE = FIXTURES / "slurm-constructed"
ENV = ["env", "SLURM_TIME_FORMAT=standard"]


def _by_id(entries):
    return {e.job_id: e for e in entries}


def check(entry, **expected):
    """Compare the named attributes at once, so a failure shows them all."""
    assert {name: getattr(entry, name) for name in expected} == expected


# ------------------------------------------------------------------------ states


@pytest.mark.parametrize(
    ("words", "state"),
    [
        (["PENDING", "PD", "RESV_DEL_HOLD", "RD"], JobState.PENDING),
        (
            ["RUNNING", "R", "CONFIGURING", "CF", "RESIZING", "RS", "SIGNALING", "SI"],
            JobState.RUNNING,
        ),
        (["SUSPENDED", "S", "STOPPED", "ST"], JobState.SUSPENDED),
        (["COMPLETING", "CG", "STAGE_OUT", "SO"], JobState.COMPLETING),
        (["COMPLETED", "CD"], JobState.COMPLETED),
        (["FAILED", "F"], JobState.FAILED),
        (["CANCELLED", "CA", "CANCELLED by 1234", "REVOKED", "RV"], JobState.CANCELLED),
        (["TIMEOUT", "TO", "DEADLINE", "DL"], JobState.TIMEOUT),
        (["NODE_FAIL", "NF", "BOOT_FAIL", "BF"], JobState.NODE_FAIL),
        (["PREEMPTED", "PR"], JobState.PREEMPTED),
        (["OUT_OF_MEMORY", "OOM"], JobState.OUT_OF_MEMORY),
        (
            ["REQUEUED", "RQ", "REQUEUE_FED", "RF", "REQUEUE_HOLD", "RH", "SPECIAL_EXIT", "SE"],
            JobState.REQUEUED,
        ),
        (["", "?", "BOGUS", "LAUNCH_FAILED"], JobState.UNKNOWN),
    ],
)
def test_slurm_state(words, state):
    assert {w: slurm_state(w) for w in words} == dict.fromkeys(words, state)


def test_slurm_state_tolerates_case_whitespace_and_sacct_truncation():
    assert slurm_state(" cancelled by 0 ") is JobState.CANCELLED
    assert slurm_state("CANCELLED+") is JobState.CANCELLED
    assert slurm_state("out_of_memory") is JobState.OUT_OF_MEMORY


# ------------------------------------------------------------------ scalar values


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", 93784),
        ("02:03:04", 7384),
        ("2:03:04", 7384),
        ("03:04", 184),
        ("0:02", 2),
        ("00:05.123", 5.123),
        ("29:58.004", 1798.004),
        ("UNLIMITED", None),
        ("infinite", None),
        ("INVALID", None),
        ("Partition_Limit", None),
        ("NOT_SET", None),
        ("", None),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == (pytest.approx(seconds) if seconds else seconds)


@pytest.mark.parametrize("text", ["5", "1-02:03", "1:2:3:4", "soon", "-1:00"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="not a Slurm duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("2024-01-01T12:00:00", datetime(2024, 1, 1, 12, 0, 0)),
        (" 2026-11-22T11:03:02\n", datetime(2026, 11, 22, 11, 3, 2)),
        ("N/A", None),
        ("Unknown", None),
        ("None", None),
        ("", None),
    ],
)
def test_parse_timestamp(text, when):
    assert parse_timestamp(text) == when


@pytest.mark.parametrize("text", ["5 minutes ago", "2024-01-01 12:00", "Mon Jan  1 12:00:00 2024"])
def test_parse_timestamp_rejects_other_time_formats(text):
    with pytest.raises(ValueError, match="SLURM_TIME_FORMAT=standard"):
        parse_timestamp(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("123K", 123 * 1024),
        ("4.5G", int(4.5 * 1024**3)),
        ("102M", 102 * 1024**2),
        ("1T", 1024**4),
        ("512", 512),
        ("0", 0),
        ("", None),
    ],
)
def test_parse_mem(text, size):
    assert parse_mem(text) == size


@pytest.mark.parametrize("text", ["12X", "G", "1,5G"])
def test_parse_mem_rejects(text):
    with pytest.raises(ValueError, match="not a Slurm memory size"):
        parse_mem(text)


def test_parse_exit_code():
    assert parse_exit_code("0:0") == (0, 0)
    assert parse_exit_code("1:0") == (1, 0)
    assert parse_exit_code("0:9") == (0, 9)
    assert parse_exit_code("") == (None, None)
    with pytest.raises(ValueError, match="CODE:SIGNAL"):
        parse_exit_code("137")


# ------------------------------------------------------------------- command lines


def test_squeue_command():
    fmt = ",".join(f"{field}:|" for field in SQUEUE_FIELDS)
    expected = [*ENV, "squeue", "--noheader", "--array", "--states=all", f"--Format={fmt}"]
    assert squeue_command() == [*expected, "--me"]
    assert squeue_command(me=False) == expected
    assert "--Format=JobID:|,ArrayJobID:|,ArrayTaskID:|," in squeue_command()[6]


def test_squeue_command_selects_allocations_once():
    argv = squeue_command(["123.batch", "123", "4_[1-3%1]", "4_7", "5+1"])
    assert argv[-2:] == ["--me", "--jobs=123,4,4_7,5+1"]
    assert squeue_command("77", me=False)[-1] == "--jobs=77"


def test_job_selection_refuses_nothing_and_garbage():
    with pytest.raises(ValueError, match="pass None"):
        squeue_command([])
    with pytest.raises(ValueError, match="not a Slurm job id"):
        sacct_command(["123; rm -rf ~"])


def test_sacct_command():
    fmt = (
        "JobID,JobName,User,Account,Partition,QOS,State,ExitCode,Elapsed,Timelimit,"
        "Submit,Start,End,NNodes,NodeList,AllocTRES,TotalCPU,MaxRSS,Comment"
    )
    assert ",".join(SACCT_FIELDS) == fmt
    assert sacct_command() == [*ENV, "sacct", "--parsable2", "--noheader", f"--format={fmt}"]
    assert sacct_command(["9_2.batch", "10"], since="2024-01-01T00:00:00")[-2:] == [
        "--jobs=9_2,10",
        "--starttime=2024-01-01T00:00:00",
    ]
    assert "-X" not in sacct_command() and "--allocations" not in sacct_command()


def test_sinfo_command():
    assert sinfo_command() == ["sinfo", "--noheader", "--format=%P|%a|%l|%F|%C|%G|%N"]
    assert sinfo_command()[-1] == "--format=" + "|".join(SINFO_FIELDS)


# -------------------------------------------------------------------------- squeue

# The verbatim captures were taken with other field lists than ours; these are theirs.
REAL_O_FIELDS = tuple(  # squeue -O (header line: JOBID|ARRAY_JOB_ID|ARRAY_TASK_ID|...)
    "JobID ArrayJobID ArrayTaskID Name UserName Partition State StateCompact TimeUsed "
    "TimeLimit NumNodes ReasonList Reason StartTime SubmitTime tres-per-node HetJobID "
    "HetJobOffset".split()
)
REAL_o_FIELDS = tuple(  # squeue -o '%i|%A|%F|%K|%j|%u|%P|%q|%T|%t|%M|%l|%D|%C|%R|%r|%S|%V|%b'
    "JobArrayID JobID ArrayJobID ArrayTaskID Name UserName Partition QOS State StateCompact "
    "TimeUsed TimeLimit NumNodes NumCPUs ReasonList Reason StartTime SubmitTime "
    "tres-per-node".split()
)


def test_parse_squeue_verbatim_O_capture():
    header, *lines = (REAL / "squeue_O_pipe.txt").read_text().splitlines()
    assert header.startswith("JOBID|ARRAY_JOB_ID|ARRAY_TASK_ID|NAME|")
    jobs = parse_squeue("\n".join(lines), REAL_O_FIELDS)
    assert len(jobs) == 101
    assert sum(j.state is JobState.PENDING for j in jobs) == 21
    by_id = _by_id(jobs)
    check(
        by_id["3"],
        name="submitit",
        user="root",
        partition="debug",
        state=JobState.COMPLETED,
        state_raw="COMPLETED",
        elapsed_s=1,
        time_limit_s=300,
        start_time=datetime(2026, 11, 22, 11, 3, 0),
        array_job_id=None,
        gpus=None,
    )
    check(by_id["1"], time_limit_s=None)  # UNLIMITED
    # JobID 99 is array task 4_74: the id is rebuilt from the array columns.
    check(by_id["4_74"], array_job_id="4", array_task_id=74, nodes=1)
    check(
        by_id["4_[77-99%100]"],
        state=JobState.PENDING,
        reason="Resources",
        start_time=None,
        array_job_id="4",
        array_task_id=None,
    )
    check(
        by_id["5"],
        reason="Priority",
        nodelist="",
        start_time=datetime(2026, 11, 22, 12, 49),  # expected start
        submit_time=datetime(2026, 11, 22, 11, 3, 2),
    )


def test_parse_squeue_verbatim_o_capture_rebuilds_slurms_own_ids():
    text = (REAL / "squeue_o_pipe.txt").read_text()
    jobs = parse_squeue(text, REAL_o_FIELDS)
    # %i (first column, ignored by the parser) is Slurm's own rendering of the id.
    assert [j.job_id for j in jobs] == [line.split("|")[0] for line in text.splitlines()]
    by_id = _by_id(jobs)
    check(by_id["1"], qos="")
    check(by_id["2"], qos="normal")
    check(
        by_id["4_76"],
        state=JobState.RUNNING,
        reason="",
        start_time=datetime(2026, 11, 22, 11, 4, 40),
    )


def test_parse_squeue_our_format():
    by_id = _by_id(parse_squeue((MADE / "squeue_O.txt").read_text()))
    assert list(by_id) == (
        "1201 1202 1300_7 1300_8 1300_9 1400+0 1400+1 1500 1501 1502 1503 1504".split()
    )
    check(
        by_id["1201"],
        state=JobState.RUNNING,
        partition="acc",
        qos="acc_debug",
        account="ehpc01",
        nodelist="as01r1b05",
        gpus=4,
        elapsed_s=3723,
        time_limit_s=7200,
        comment="hpcui:4f2a9c",
    )
    check(
        by_id["1202"],
        state=JobState.PENDING,
        reason="Priority",
        nodes=2,
        nodelist="",
        gpus=8,
        time_limit_s=86400,
        start_time=datetime(2024, 1, 2, 3, 0),
        comment="",
    )
    check(by_id["1300_7"], array_job_id="1300", array_task_id=7)
    check(by_id["1300_9"], reason="JobArrayTaskLimit", start_time=None)
    check(by_id["1400+1"], nodes=2, gpus=0, array_job_id=None)
    # --gpus=2 on a site that does not track gres/gpu; the last field keeps its '|'.
    check(by_id["1500"], gpus=2, comment="note|with pipe", time_limit_s=None)
    # gres/gpu:h100:4 per node on 2 nodes
    check(by_id["1501"], gpus=8, state=JobState.OUT_OF_MEMORY, elapsed_s=93784)
    check(by_id["1502"], state=JobState.TIMEOUT, reason="TimeLimit")
    check(by_id["1503"], state_raw="CONFIGURING", state=JobState.RUNNING, time_limit_s=None)
    check(by_id["1504"], state=JobState.COMPLETING)


def test_parse_squeue_edge_cases():
    assert parse_squeue("") == []
    assert parse_squeue("\n  \n") == []
    with pytest.raises(ValueError, match="expected 22 '\\|'-separated fields, got 3"):
        parse_squeue("1|2|3|\n")
    line = (MADE / "squeue_O.txt").read_text().splitlines()[0]
    with pytest.raises(ValueError, match="SLURM_TIME_FORMAT"):
        parse_squeue(line.replace("2024-01-01T11:00:00", "Mon 11:00"))


# --------------------------------------------------------------------------- sacct


def test_parse_sacct_verbatim_capture():
    header, *lines = (REAL / "sacct_P.txt").read_text().splitlines()
    by_id = _by_id(parse_sacct("\n".join(lines), header.split("|")))
    assert len(by_id) == 103  # 265 lines: 1 header, 103 allocations, 161 steps
    assert not any("." in job_id for job_id in by_id)
    check(
        by_id["1"],
        name="wrap",
        user="root",
        partition="debug",
        nodelist="vm",
        state=JobState.COMPLETED,
        exit_code=0,
        signal=0,
        elapsed_s=2,
        start_time=datetime(2026, 11, 22, 11, 1, 57),
        end_time=datetime(2026, 11, 22, 11, 1, 59),
        cpus=1,
        mem_bytes=20000 * 1024**2,
        gpus=0,
        cpu_time_s=None,
        max_rss_bytes=None,
        cpu_efficiency=None,
    )
    # Its steps 4_0.batch and 4_0.0 are folded in.
    check(by_id["4_0"], array_job_id="4", array_task_id=0, mem_bytes=102 * 1024**2)
    check(
        by_id["5"],
        state=JobState.PENDING,
        start_time=None,
        end_time=None,
        nodelist="",
        gpus=None,
        cpus=None,
    )
    check(by_id["4_[79-99%100]"], state=JobState.PENDING, array_job_id="4", array_task_id=None)


def test_parse_sacct_our_format_folds_steps():
    by_id = _by_id(parse_sacct((MADE / "sacct_P.txt").read_text()))
    assert list(by_id) == (
        "2001 2002 2010_0 2010_1 2010_2 2010_[3-5%2] 2020 2021 2022 2023 2024 2030+0 2030+1 "
        "2040".split()
    )
    check(
        by_id["2001"],
        gpus=4,
        cpus=80,
        mem_bytes=480 * 1024**3,
        max_rss_bytes=98765432 * 1024,  # step 0, the largest
        comment="hpcui:4f2a9c",
        time_limit_s=7200,
    )
    train = by_id["2001"]
    assert train.cpu_time_s == pytest.approx(143999.124)  # 1-15:59:54 + 00:05.123 + 00:00.001
    assert train.cpu_efficiency == pytest.approx(143999.124 / (3600 * 80))
    assert train.mem_efficiency == pytest.approx(98765432 * 1024 / (480 * 1024**3))
    check(
        by_id["2002"],
        state=JobState.CANCELLED,
        state_raw="CANCELLED by 1000",
        max_rss_bytes=2011120 * 1024,
    )
    # The allocation line says 00:00:00; its batch step measured 01:35.250.
    assert by_id["2010_0"].cpu_time_s == pytest.approx(95.25)
    check(by_id["2010_1"], state=JobState.FAILED, exit_code=1, signal=0)
    check(by_id["2010_2"], state=JobState.OUT_OF_MEMORY, exit_code=0, signal=125)
    assert by_id["2010_2"].mem_efficiency == pytest.approx(16776312 / (16 * 1024**2))
    check(
        by_id["2010_[3-5%2]"],
        state=JobState.PENDING,
        start_time=None,
        cpus=None,
        cpu_efficiency=None,
    )
    check(by_id["2020"], state=JobState.NODE_FAIL, gpus=8, nodes=2)
    check(by_id["2021"], state=JobState.TIMEOUT, cpu_time_s=1798.004)
    check(by_id["2022"], state=JobState.FAILED, exit_code=0, signal=9)
    check(by_id["2023"], state=JobState.PREEMPTED, time_limit_s=None)
    check(by_id["2024"], state=JobState.REQUEUED)
    check(by_id["2030+1"], nodes=2, gpus=0)
    assert by_id["2030+1"].mem_efficiency == pytest.approx(7340011 * 1024 / (256 * 1024**3))
    # Running: usage arrives as steps end, so no efficiency yet.
    check(by_id["2040"], state=JobState.RUNNING, end_time=None, cpu_efficiency=None)


def test_efficiencies_serialize_with_the_record():
    train = _by_id(parse_sacct((MADE / "sacct_P.txt").read_text()))["2001"]
    dumped = train.model_dump(mode="json")
    assert dumped["cpu_efficiency"] == pytest.approx(0.5, abs=1e-4)
    assert dumped["state"] == "COMPLETED"


def test_parse_sacct_rejects_a_line_with_missing_fields():
    with pytest.raises(ValueError, match="expected 19"):
        parse_sacct("123|name|alice\n")


# --------------------------------------------------------------------------- sinfo


def test_parse_sinfo_verbatim():
    (debug,) = parse_sinfo((REAL / "sinfo_o_pipe.txt").read_text())
    check(
        debug,
        partition="debug",
        is_default=True,
        avail="up",
        time_limit_s=None,
        nodes_alloc=0,
        nodes_idle=1,
        nodes_other=0,
        nodes_total=1,
        cpus_idle=2,
        cpus_total=2,
        gres="",
        gpus_per_node=None,
        nodelist="vm",
    )


def test_parse_sinfo_gpu_site():
    acc, gpp, debug = parse_sinfo((MADE / "sinfo_o_pipe.txt").read_text())
    check(
        acc,
        partition="acc",
        is_default=True,
        time_limit_s=2 * 86400,
        nodes_idle=2,
        nodes_total=13,
        gres="gpu:h100:4(S:0-1)",
        gpus_per_node=4,
    )
    check(gpp, is_default=False, cpus_alloc=11200, nodelist="gs01r1b[01-62],gs01r2b[01-62]")
    check(debug, avail="down", time_limit_s=1800, nodes_other=2)


def test_parse_sinfo_rejects_bad_counts():
    with pytest.raises(ValueError, match="allocated/idle/other/total"):
        parse_sinfo("debug*|up|infinite|1/2|0/2/0/2|(null)|vm\n")
