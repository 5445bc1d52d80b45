"""The Job screen's usage panel text (hpcui.tui.usage_view): bars, sparklines, verdicts."""

from rich.text import Text

from hpcui.jobs.usage import GpuUse, TaskUse, UsageSample
from hpcui.tui.usage_view import mean_gpu_pct, sparkline, usage_text


def look(at: float, utils: list[float | None]) -> UsageSample:
    return UsageSample(
        cluster="dev",
        job_id="7",
        at=at,
        gpus=[
            GpuUse(
                node="node1",
                index=i,
                util_pct=u,
                mem_used_mib=6735,
                mem_total_mib=81559,
                power_w=694.4,
            )
            for i, u in enumerate(utils)
        ],
        tasks=[TaskUse(step="7.0", ntasks=4, cpu_pct=98.0, rss_mb=612.0, max_rss_mb=700.0)],
        notes=["node2: no nvidia-smi or rocm-smi on this node"],
    )


def plain(markup: str) -> str:
    return Text.from_markup(markup).plain


def test_running_job_panel():
    samples = [look(t, [100, 0, 0, 0]) for t in (0, 5, 10)]
    text = plain(usage_text(samples, running=True))
    lines = text.splitlines()
    assert lines[0] == "now · 3 look(s) over 10 s"
    assert lines[1] == (
        "node1 GPU0 ████████████████████████ 100%  mem 6735/81559 MiB (8%)  694 W  ███"
    )
    assert lines[2].startswith("node1 GPU1 ························   0%") and lines[2].endswith(
        "▁▁▁"
    )
    assert "step 7.0: 4 task(s) · CPU 98% per task · RSS 612 MiB (max 700 MiB)" in text
    assert "note: node2: no nvidia-smi or rocm-smi on this node" in text
    assert "! 3 of 4 GPUs idle for the last 10 s" in text
    assert "per GPU over the job" not in text  # the summary is for an ended job


def test_ended_job_shows_what_was_kept_with_the_summary():
    text = plain(usage_text([look(0, [100, 50]), look(30, [60, 0])], running=False))
    assert text.startswith("last look while it ran · 2 look(s) over 30 s")
    assert "per GPU over the job" in text
    assert "per GPU over the job   mean%  peak%  mean MiB  peak MiB" in text
    assert "node1 GPU0                80    100      6735      6735" in text


def test_nothing_kept_and_unknown_values():
    assert usage_text([], running=True) == "Sampling GPU and CPU use…"
    assert "No usage was kept for this job" in usage_text([], running=False)
    assert sparkline([0, 49, 100, None]) == "▁▄█?"
    assert mean_gpu_pct(look(0, [100, 0, None, 0])) == 100 / 3
    assert mean_gpu_pct(look(0, [])) is None
