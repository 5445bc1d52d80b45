"""A chain's shell lines, run by a real bash (backends/chain.py).

The submit line is run with `sbatch`, `qsub` and their cancel commands as small recording
scripts on PATH: what is checked here is the shell's own logic (ids passed along, all or
nothing, the ids file); tests/integration/test_chain.py runs chains on the dev cluster's
real Slurm and OpenPBS.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from hpcui.backends import chain
from hpcui.backends.batch import BatchSpec
from hpcui.backends.pbs import script as pbs_script
from hpcui.backends.slurm import script as slurm_script


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with a recording sbatch/qsub (ids 501, 502, ...; refuses when its count
    reaches $REFUSE_AT) and scancel/qdel that log what they were asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    submit = (
        'n=$(( $(cat "$LOG_DIR/n" 2>/dev/null || echo 0) + 1 )); echo $n > "$LOG_DIR/n"\n'
        'echo "$*" >> "$LOG_DIR/submits"\n'
        'if [ "$n" = "${REFUSE_AT:-0}" ]; then echo "error: QOSMaxSubmitJobPerUserLimit" >&2; '
        "exit 1; fi\n"
    )
    _tool(bin_dir, "sbatch", submit + 'echo "$((500 + n));dev"\n')
    _tool(bin_dir, "qsub", submit + 'echo "$((500 + n)).pbs-head"\n')
    for cancel in ("scancel", "qdel"):
        _tool(bin_dir, cancel, f'echo "$*" >> "$LOG_DIR/{cancel}"\n')
    (tmp_path / "job").mkdir()
    return tmp_path


def _run(site: Path, command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=site / "job",
        env={**os.environ, "PATH": f"{site / 'bin'}:{os.environ['PATH']}", "LOG_DIR": str(site),
             "HPCUI_JOB_FOLDER": str(site / "job"), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )  # fmt: skip


def test_slurm_segments_each_wait_for_the_one_before(site: Path):
    res = _run(site, slurm_script.chain_submit_command("submission.sh", 3, ["77"]))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["501", "502", "503"]  # `;cluster` cut
    assert (site / "job" / chain.IDS).read_text().split() == ["501", "502", "503"]
    assert (site / "submits").read_text().splitlines() == [
        "--parsable submission.sh",  # the script's own directives (afterok:77 among them)
        "--parsable --dependency=afterok:77,afterany:501 submission.sh",
        "--parsable --dependency=afterok:77,afterany:502 submission.sh",
    ]


def test_pbs_segments_use_depend_afterany_with_the_full_id(site: Path):
    cmd = pbs_script.chain_submit_command(pbs_script.qsub_command("submission.sh"), 2)
    res = _run(site, cmd)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["501.pbs-head", "502.pbs-head"]
    assert (site / "submits").read_text().splitlines()[1] == (
        "-W depend=afterany:501.pbs-head submission.sh"
    )


@pytest.mark.parametrize("refused", [1, 3])
def test_a_refused_segment_cancels_the_queued_ones_and_prints_no_id(site: Path, refused: int):
    res = _run(site, slurm_script.chain_submit_command("submission.sh", 3), REFUSE_AT=str(refused))
    assert res.returncode != 0
    assert res.stdout == ""  # no id: the client reads "rejected", nothing stays queued
    assert "QOSMaxSubmitJobPerUserLimit" in res.stderr
    cancelled = (site / "scancel").read_text().split() if refused > 1 else []
    assert cancelled == [str(500 + k) for k in range(1, refused)]
    assert not (site / "job" / chain.IDS).exists()


def _spec(folder: Path) -> BatchSpec:
    return BatchSpec(folder=str(folder), token="t", name="c", chain=True, time_s=60)


def _body_lines(script: str, *needles: str) -> str:
    return "\n".join(line for line in script.splitlines() if any(n in line for n in needles))


def test_the_segment_after_the_finisher_is_cancelled_by_it(site: Path):
    folder = site / "job"
    (folder / chain.IDS).write_text("501\n502\n503\n")
    line = chain.cancel_rest(str(folder), "${SLURM_JOB_ID}", "scancel")
    assert _run(site, line, SLURM_JOB_ID="501").returncode == 0
    assert not (site / "scancel").exists()  # no DONE: the next segment goes on
    (folder / chain.DONE).write_text("501\n")
    assert _run(site, line, SLURM_JOB_ID="501").returncode == 0
    assert (site / "scancel").read_text().split() == ["502", "503"]


@pytest.mark.parametrize("render", [slurm_script.render_script, pbs_script.render_script])
def test_a_segment_leaves_at_once_when_the_work_is_done(site: Path, render):
    folder = site / "job"
    script = render(_spec(folder))
    assert f"export {chain.ENV}=1" in script
    skip = _body_lines(script, "segment skipped")
    assert _run(site, skip + "\necho RAN").stdout.strip() == "RAN"
    (folder / chain.DONE).write_text("501\n")
    res = _run(site, skip + "\necho RAN")
    assert res.returncode == 0 and "RAN" not in res.stdout
    assert "an earlier segment of this chain finished the work (job 501)" in res.stderr


def test_a_checkpointed_call_is_the_next_segments_call(site: Path):
    folder = site / "job"
    word = chain.call_pickle(str(folder), "task.pkl")
    assert _run(site, f"echo {word}").stdout.strip() == "task.pkl"
    (folder / chain.RESUME).write_bytes(b"x")
    assert _run(site, f"echo {word}").stdout.strip() == chain.RESUME


def test_the_slurm_script_keeps_sruns_status_after_the_chain_lines():
    script = slurm_script.render_script(_spec(Path("/f")))
    srun, cancel, end = script.rstrip("\n").splitlines()[-3:]
    assert srun.startswith("srun ") and srun.endswith("; rc=$?")
    assert "scancel $rest" in cancel and end == "exit $rc"


@pytest.mark.parametrize(
    ("head", "limit_near", "finished"),
    [
        (None, False, False),  # killed at the limit: the next segment goes on
        (None, True, False),
        (b"\x80\x04\x95...\x8c\x07success", False, True),  # returned in time: done
        (b"\x80\x04\x95...\x8c\x07success", True, False),  # returned for the limit: go on
        (b"\x80\x04\x95...\x8c\x05error", True, True),  # raised: a rerun repeats it
    ],
)
def test_which_segment_finished_the_work(head, limit_near, finished):
    assert chain.finished_work(head, limit_near) is finished


def test_a_chain_has_at_most_max_segments():
    with pytest.raises(ValueError, match="1 to 50 segments"):
        slurm_script.chain_submit_command("submission.sh", chain.MAX_SEGMENTS + 1)
