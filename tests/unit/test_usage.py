"""Usage of running jobs: parsing the one-command sample (captured on the dev cluster),
what is kept, the summary, and the verdicts users act on."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hpcui.backends.usage import (
    local_usage_command,
    parse_local_usage,
    parse_slurm_usage,
    slurm_usage_command,
)
from hpcui.cli.cmd_usage import bar
from hpcui.jobs.usage import GpuUse, TaskUse, UsageSample, UsageStore, summary, to_sample, verdicts

FIXTURES = Path(__file__).parent.parent / "fixtures"
DEV = FIXTURES / "slurm-22.05.8-dev"
H100 = FIXTURES / "nvidia-smi-580-h100"


def test_two_nodes_with_interleaved_lines():
    r = parse_slurm_usage((DEV / "usage_two_nodes.txt").read_text())
    assert [n.host for n in r.nodes] == ["node1", "node2"]
    assert [[g.index for g in n.gpus] for n in r.nodes] == [[0, 1, 2, 3]] * 2
    assert [[g.util_pct for g in n.gpus] for n in r.nodes] == [[100, 0, 0, 0]] * 2
    assert r.notes == ()
    steps = {s.step: s for s in r.steps}
    assert steps["6701.0"].ntasks == 4 and steps["6701.0"].cpu_s == 2
    assert steps["6701.0"].elapsed_s == 6 and steps["6701.0"].cpu_pct == pytest.approx(
        33.3, abs=0.1
    )
    assert steps["6701.0"].rss_mb == pytest.approx(13447 / 1024)
    assert steps["6701.0"].max_rss_mb == pytest.approx(13520 / 1024)


def test_only_the_jobs_own_gpus():
    r = parse_slurm_usage((DEV / "usage_one_gpu.txt").read_text())
    [node] = r.nodes
    assert [g.index for g in node.gpus] == [1, 2]  # SLURM_STEP_GPUS=1,2 of the node's 4


def test_a_cpu_job_on_a_gpu_node_has_no_gpus_and_no_idle_warning():
    """Issue 35, defect 6: the node's 4 GPUs (one of them busy with another job) are not
    the CPU job's: none is shown, no "3 of 4 GPUs idle" (captured on the dev cluster)."""
    r = parse_slurm_usage((DEV / "usage_cpu_job.txt").read_text())
    [node] = r.nodes
    assert node.gpus == () and node.note == "no GPU allocated to this job on this node"
    looks = [to_sample("dev", "2590", r, None).model_copy(update={"at": t}) for t in (0, 300)]
    assert all(s.gpus == [] for s in looks) and verdicts(looks) == []


def test_a_node_that_shows_only_the_jobs_gpus_keeps_them():
    # cgroup-constrained devices: nvidia-smi lists 1 GPU (index 0) for a job that has GPU 3
    line = (H100 / "idle_query_csv_noheader_nounits.stdout").read_text().strip()
    text = f"@@hpcui nodes 1\n0: @@hpcui node n7 3\n0: @@hpcui smi nvidia\n0: {line}\n0: @@hpcui rc 0\n@@hpcui end\n"
    [node] = parse_slurm_usage(text).nodes
    assert [g.index for g in node.gpus] == [0]


def test_not_running():
    r = parse_slurm_usage((DEV / "usage_not_running.txt").read_text())
    assert r.nodes == () and r.steps == ()
    assert r.notes == ("the job is not running: no node to sample",)


def test_missing_tool_failing_driver_and_amd_nodes():
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    rocm = json.dumps(json.loads((FIXTURES / "rocm-smi" / "mi100_rocm602.json").read_text()))
    text = "\n".join(
        [
            "@@hpcui nodes 3",
            "0: @@hpcui node cpu1 ",
            "0: @@hpcui smi none",
            "1: @@hpcui node gpu2 0",
            "1: @@hpcui smi nvidia",
            f"1: {msg}",
            "1: @@hpcui rc 9",
            "2: @@hpcui node nid005000 2,3",
            "2: @@hpcui smi amd",
            f"2: {rocm}",
            "2: @@hpcui rc 0",
            "srun: error: Unable to create step for job 1: Invalid generic resource (gres) specification",
            "@@hpcui end",
        ]
    )
    r = parse_slurm_usage(text)
    assert [n.note for n in r.nodes[:2]] == [
        "no nvidia-smi or rocm-smi on this node",
        f"nvidia-smi failed: {msg}",
    ]
    assert [g.index for g in r.nodes[2].gpus] == [2, 3]
    assert r.nodes[2].gpus[0].name == "Arcturus GL-XL [Instinct MI100]"
    assert r.notes == (
        "srun: srun: error: Unable to create step for job 1: Invalid generic resource (gres) specification",
    )


def test_a_cut_off_answer_is_an_error_not_an_empty_sample():
    text = (DEV / "usage_two_nodes.txt").read_text()
    with pytest.raises(ValueError, match="cut off"):
        parse_slurm_usage(text[: len(text) // 2])


def test_commands_quote_the_job_id():
    assert "'1;rm -rf ~'" in slurm_usage_command("1;rm -rf ~")
    with pytest.raises(ValueError, match="not a local job id"):
        local_usage_command("1;rm", "/s")
    assert "ps -o pcpu=,rss=,etimes=,comm= -s 4242 " in local_usage_command("4242_3", "/s t")
    assert "'/s t'/gpus/held/4242_3" in local_usage_command("4242_3", "/s t")


def test_local_usage_counts_the_ranks_and_only_the_gpus_the_job_holds():
    line = (H100 / "busy_query_csv_noheader_nounits.stdout").read_text().strip()
    uuid = line.split(", ")[1]
    text = "\n".join(
        [
            "@@hpcui ps",
            "  0.0  3500  40 bash",
            " 98.0 612000  40 python3",
            " 50.0 412000  40 python3",
            "@@hpcui held",
            f"4242 {uuid}",
            "@@hpcui nodes 1",
            "0: @@hpcui node ws ",
            "0: @@hpcui smi nvidia",
            f"0: {line}",
            "0: @@hpcui rc 0",
            "@@hpcui end",
        ]
    )
    r = parse_local_usage(text, "4242")
    [step] = r.steps
    assert step.ntasks == 2 and step.cpu_pct == pytest.approx(74.0)
    assert step.rss_mb == pytest.approx((612000 + 412000) / 1024 / 2)
    assert [g.util_pct for g in r.nodes[0].gpus] == [100]
    no_gpu = parse_local_usage(text.replace(f"4242 {uuid}", ""), "4242")
    assert no_gpu.nodes[0].gpus == ()  # the machine's GPU is not this job's


# -- samples, history, verdicts ---------------------------------------------------------------


def sample(
    at: float, utils: list[float | None], mem: float = 1000.0, cpu: float | None = 50.0
) -> UsageSample:
    return UsageSample(
        cluster="c",
        job_id="1",
        at=at,
        gpus=[
            GpuUse(node="n1", index=i, util_pct=u, mem_used_mib=mem, mem_total_mib=81559)
            for i, u in enumerate(utils)
        ],
        tasks=[TaskUse(step="1.0", ntasks=len(utils), cpu_pct=cpu)],
    )


def test_three_of_four_idle_for_minutes():
    history = [sample(t, [100, 0, 0, 0]) for t in (0, 60, 120, 180, 240, 300)]
    assert verdicts(history) == [
        "3 of 4 GPUs idle for the last 5 minutes — is the model wrapped in DDP/FSDP (one rank per GPU)?"
    ]


def test_one_busy_moment_in_the_window_is_not_idle():
    history = [sample(0, [100, 0, 0, 0]), sample(60, [100, 40, 0, 0]), sample(120, [100, 0, 0, 0])]
    assert verdicts(history)[0].startswith("2 of 4 GPUs idle for the last 2 minutes")


def test_all_idle_asks_about_the_device():
    history = [sample(0, [0, 0]), sample(15, [2, 0]), sample(30, [1, 0])]
    assert verdicts(history)[0].startswith(
        "All 2 GPU(s) idle for the last 30 s — does the code put"
    )


def test_one_sample_says_nothing_about_idleness():
    (said,) = verdicts([sample(0, [100, 0, 0, 0])])
    assert said.startswith("No verdict yet: 1 look(s) over 0 s; one needs 3 looks over 10 s")


def test_no_verdict_from_two_looks_or_a_few_seconds():
    # issue 49: "3 of 4 GPUs idle for the last 0 s" from looks a second apart
    for history in (
        [sample(0, [100, 0, 0, 0]), sample(1, [100, 0, 0, 0])],
        [sample(0, [100, 0, 0, 0]), sample(2, [100, 0, 0, 0]), sample(4, [100, 0, 0, 0])],
    ):
        said = verdicts(history)
        assert len(said) == 1 and said[0].startswith("No verdict yet"), said
    enough = [sample(t, [100, 0, 0, 0]) for t in (0, 5, 10)]
    assert verdicts(enough)[0].startswith("3 of 4 GPUs idle for the last 10 s")


def test_near_oom_and_cpu_bound():
    near = sample(0, [100], mem=79000)  # a fact of now: said from one look
    assert verdicts([near])[1:] == [
        "GPU memory 97% on n1 GPU 0 — near OOM: a smaller batch, activation checkpointing or FSDP."
    ]
    starved = [sample(t, [12, 15], cpu=100) for t in (0, 5, 10)]  # a trend: needs looks
    assert verdicts(starved) == [
        "CPU-bound: GPUs < 20%, CPU 100% per task — feed the GPUs faster (DataLoader num_workers, cpus_per_task, pinned memory)."
    ]
    unknown = sample(0, [None, None], cpu=100)
    later = [sample(t, [None, None], cpu=100) for t in (10, 20)]
    assert verdicts([unknown, *later]) == []  # unknown is not idle


def test_summary_mean_and_peak_per_gpu():
    s = summary([sample(0, [100, 0], mem=1000), sample(10, [50, 0], mem=3000)])
    assert [
        (g.index, g.samples, g.mean_util_pct, g.peak_util_pct, g.mean_mem_mib, g.peak_mem_mib)
        for g in s
    ] == [
        (0, 2, 75.0, 100, 2000.0, 3000),
        (1, 2, 0.0, 0, 2000.0, 3000),
    ]


def test_cpu_percent_from_the_change_since_the_last_sample():
    r = parse_slurm_usage((DEV / "usage_two_nodes.txt").read_text())
    first = to_sample("dev", "6701", r)
    assert {t.step: t.cpu_pct for t in first.tasks}["6701.0"] == pytest.approx(33.3)
    later = r.__class__(
        r.nodes,
        tuple(
            s.__class__(
                s.step,
                s.ntasks,
                (s.cpu_s or 0) + 9,
                (s.elapsed_s or 0) + 10,
                s.rss_mb,
                s.max_rss_mb,
            )
            for s in r.steps
        ),
    )
    assert {t.step: t.cpu_pct for t in to_sample("dev", "6701", later, first).tasks}[
        "6701.0"
    ] == 90.0


def test_store_keeps_lines_0600_and_skips_a_cut_line(tmp_path):
    store = UsageStore(tmp_path / "usage" / "c" / "1.jsonl")
    store.append(sample(0, [1]))
    store.append(sample(1, [2]))
    with open(store.path, "a") as f:
        f.write('{"cluster": "c", "job_')  # a crash mid-write
    assert [s.at for s in store.load()] == [0, 1]
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert UsageStore(tmp_path / "none.jsonl").load() == []


def test_last_reads_the_tail_and_agrees_with_the_whole_history(tmp_path):
    from hpcui.jobs import usage

    store = UsageStore(tmp_path / "1.jsonl")
    assert store.last() is None
    for t in range(400):  # well past the tail it reads
        store.append(sample(t, [t % 100, 0, 0, 0]))
    assert store.path.stat().st_size > usage.TAIL_BYTES
    assert store.last() == store.load()[-1] and store.last().at == 399
    with open(store.path, "a") as f:
        f.write('{"cluster": "c", "job_')  # a crash mid-write
    assert store.last().at == 399


def test_job_ids_make_safe_file_names():
    from hpcui.jobs.usage import file_name

    assert file_name("1234_5") == "1234_5" and file_name("12[3].pbsmock") == "12[3].pbsmock"
    assert file_name("../../etc/passwd") == "_.._.._etc_passwd" and file_name("") == "_"


def test_bars():
    assert bar(100, 10) == "[##########]" and bar(0, 10) == "[..........]"
    assert bar(None, 4) == "[????]" and bar(55, 10) == "[######....]"


def test_the_cli_and_the_app_draw_one_bar(monkeypatch):
    """Same cells and colour from formatting.usage_bar: the CLI in ASCII (coloured on a
    terminal), the app in block glyphs; an idle GPU is red in both."""
    import io

    from hpcui.common.formatting import usage_bar
    from hpcui.tui.usage_view import bar as app_bar

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for pct, colour in ((80, "green"), (20, "yellow"), (2, "red")):
        cells, said = usage_bar(pct, 10, "#", ".")
        assert said == colour
        assert app_bar(pct, 10).startswith(f"[{colour}]{cells.rstrip('.').replace('#', '█')}[/]")
    monkeypatch.delenv("NO_COLOR", raising=False)
    red = bar(2, 10, stream=Tty())
    assert red == "[\x1b[31m..........\x1b[0m]"


# -- PBS: the exec hosts from qstat, the probe through the node shell ------------------------


def test_pbs_command_finds_the_exec_hosts_of_real_pbs_pro_output(tmp_path):
    import subprocess

    from hpcui.backends.usage import parse_pbs_usage, pbs_usage_command

    fake = tmp_path / "fake-ssh"  # stands for `ssh HOST sh`: says where it ran, reads the probe
    fake.write_text('#!/bin/sh\necho "@@hpcui node $1 "; echo "@@hpcui smi none"; cat >/dev/null\n')
    fake.chmod(0o755)
    qstat = ["cat", str(FIXTURES / "pbs-pro-19.0" / "qstat_f_json_running.json")]
    cmd = pbs_usage_command("4815.charon", qstat, str(fake))
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout
    text, reading = parse_pbs_usage(out)
    assert [n.host for n in reading.nodes] == ["charon24", "charon21"]  # exec_host order
    assert {n.note for n in reading.nodes} == {"no nvidia-smi or rocm-smi on this node"}
    assert '"exec_host":"charon24/0*2+charon21/0*2"' in text  # handed to the JSON parser
    ended = subprocess.run(
        ["sh", "-c", pbs_usage_command("1.x", ["echo", '    "job_state":"F",'], str(fake))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert parse_pbs_usage(ended)[1].notes == ("the job is not running: no node to sample",)


def test_pbs_resources_used_per_core():
    from hpcui.backends.usage import pbs_steps

    [s] = pbs_steps(
        "7.srv", {"cput": "00:10:00", "walltime": "00:05:00", "mem": "4194304kb", "ncpus": "4"}
    )
    assert (s.ntasks, s.cpu_s, s.elapsed_s, s.rss_mb) == (4, 150.0, 300.0, 1024.0)
    assert s.cpu_pct == 50.0
    assert pbs_steps("7.srv", {}) == ()
