"""Will it finish (issue 48, part 2): progress read from recorded training logs (tqdm,
Lightning's two bars, Hugging Face Trainer, plain prints), the ETA with its basis, and no
guess where a log says nothing of its total."""

from __future__ import annotations

import pytest

from hpcui.jobs.finish import FinishWatch
from hpcui.logs.progress import read_progress, will_finish
from tests.conftest import ROOT

LOGS = ROOT / "tests" / "fixtures" / "progress-logs"


def cut(name: str, fraction: float) -> str:
    """A recorded log as read mid-run: its first `fraction` of bytes."""
    text = (LOGS / name).read_text()
    return text[: int(len(text) * fraction)]


def test_a_tqdm_bar_gives_its_count_and_its_own_rate():
    p = read_progress(cut("tqdm.err", 0.5))
    assert p is not None and p.source == "tqdm" and p.total == 300 and 100 < p.done < 200
    f = will_finish(p, elapsed_s=60, limit_s=600)
    assert f is not None and f.basis == "the progress bar's own rate"
    assert f.needed_s == pytest.approx((300 - p.done) / p.rate_per_s)
    assert f.will_finish is True and "it should finish" in f.line()


def test_the_hugging_face_trainer_bar_counts_the_whole_run():
    p = read_progress(cut("hf-trainer.err", 0.5))
    assert p is not None and p.total == 120 and p.scope == ""
    f = will_finish(p, elapsed_s=100, limit_s=100.5)  # half a second left, ~0.6 s needed
    assert f is not None and f.will_finish is False
    assert "it will NOT finish" in f.line() and "hpcui update JOB --time" in f.line()


def test_lightnings_tqdm_bar_knows_only_its_epoch_and_says_so():
    p = read_progress(cut("lightning-tqdm.out", 0.6))
    assert p is not None and p.scope.startswith("epoch ") and p.total == 50
    f = will_finish(p, elapsed_s=10, limit_s=20)
    assert f is not None and f.will_finish is None  # no verdict on the run
    assert "the log does not say how many epochs follow" in f.line()


def test_lightnings_rich_bar_draws_at_the_end_only_so_mid_run_there_is_nothing():
    assert read_progress(cut("lightning-rich.out", 0.5)) is None  # no guess
    whole = read_progress((LOGS / "lightning-rich.out").read_text())
    assert whole is not None and whole.done == whole.total == 150  # epochs 0-2 of 50


def test_plain_prints_give_the_rate_since_the_start():
    p = read_progress(cut("plain.out", 0.5))
    assert p is not None and p.source == "counted" and p.unit == "step" and p.total == 50
    f = will_finish(p, elapsed_s=p.done * 2.0, limit_s=60)  # 2 s a step: 100 s in all
    assert f is not None and f.needed_s == pytest.approx((50 - p.done) * 2.0)
    assert f"{p.done:.0f} step in the" in f.basis and f.will_finish is False


def test_no_total_no_eta():
    assert read_progress("epoch 3 loss=0.5\nstep 120 loss 0.3\n{'loss': 0.2}\n") is None
    assert will_finish(None, elapsed_s=10, limit_s=20) is None


def test_two_looks_time_the_rate_from_the_last_minutes(tmp_path):
    class Handle:
        job_id, hpcui_job = "77", False

        class details:
            stdout, stderr = "out", ""

    class Logs:
        text = "step 10/100\n"

        def stat_size(self, path):
            return len(self.text)

        def read_file(self, path, offset=0, length=None):
            return self.text.encode()[offset:]

    logs = Logs()
    watch = FinishWatch(tmp_path, "dev", logs)  # type: ignore[arg-type]
    first = watch.look(Handle(), elapsed_s=100, limit_s=1000, now=1000.0)
    assert first is not None and "since it started" in first.basis  # one look: the start
    logs.text = "step 10/100\nstep 40/100\n"
    second = watch.look(Handle(), elapsed_s=160, limit_s=1000, now=1060.0)
    assert second is not None and second.basis == "30 step in the last 00:01:00"
    assert second.needed_s == pytest.approx(60 / 0.5)  # 0.5 step/s, 60 steps left
