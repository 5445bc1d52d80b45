"""Issue 35, "metrics worth looking at": the forms training loops print, read without being
told (key=value, key: value, a Python dict as Hugging Face's Trainer prints it, JSON lines,
``Epoch 3/10``), the x axis they are plotted against, and what is not a metric."""

from __future__ import annotations

import re

import pytest

from hpcui.metrics import INDEX, MetricReader, parse_line

#: lines as the common training loops print them (the PyTorch examples' ``Train Epoch``
#: line is read through the regex; Lightning's progress bar keeps its key=value tail)
HF_TRAINER = "{'loss': 0.6931, 'grad_norm': 1.25, 'learning_rate': 4.5e-05, 'epoch': 0.25}"
LIGHTNING = "Epoch 2: 100%|██████████| 50/50 [00:03<00:00, 14.2it/s, v_num=0, train_loss=0.412]"
KEY_VALUE = "step=120 loss=0.53 lr=1e-4 rank=0 world_size=8 SLURM_JOB_ID=4242"
COLON = "epoch: 3, loss: 0.25, acc: 91.2%"
JSON_LINE = '{"step": 30, "train": {"loss": 0.3}, "ok": true, "tag": "x"}'
SUBMITIT = "submitit INFO (2026-11-26 08:25:56,746) - Starting with JobEnvironment(job_id=2696)"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (HF_TRAINER, {"loss": 0.6931, "grad_norm": 1.25, "learning_rate": 4.5e-05, "epoch": 0.25}),
        (LIGHTNING, {"epoch": 2.0, "train_loss": 0.412}),
        (KEY_VALUE, {"step": 120.0, "loss": 0.53, "lr": 1e-4}),
        (COLON, {"epoch": 3.0, "loss": 0.25, "acc": 91.2}),
        (JSON_LINE, {"step": 30.0, "train/loss": 0.3}),
        (
            "Epoch [3/10] step 120/1000 | val_loss=-1.5e+00",
            {"epoch": 3, "step": 120, "val_loss": -1.5},
        ),
        ("started at 10:00:00 on 2026-11-26 with torch v2.13.0", {}),
        ("rank: 0 local_rank: 1 port=29500 pid=77", {}),
        (
            "step 3 loss 0.25 val_loss 1e-2 took 5 s, lr 3e-4",
            {"step": 3, "loss": 0.25, "val_loss": 0.01, "lr": 3e-4},
        ),
        ("", {}),
    ],
)
def test_one_line(line, want):
    assert parse_line(line) == want


def test_x_axis_is_the_first_step_key_carried_to_the_lines_under_it():
    reader = MetricReader()
    reader.feed(
        [SUBMITIT, "loss=9 before any epoch", "Epoch 1/2", "loss=0.9", "acc: 50%", "Epoch 2/2",
         "loss=0.4 val_loss=nan", "acc: 80%"]
    )  # fmt: skip
    m = reader.metrics("dev:1")
    assert m.x_name == "epoch" and m.job == "dev:1"
    assert (m.get("loss").x, m.get("loss").y) == ([1.0, 2.0], [0.9, 0.4])
    assert (m.get("acc").x, m.get("acc").y) == ([1.0, 2.0], [50.0, 80.0])
    assert m.get("val_loss") is None  # nan is not plotted
    assert "epoch" not in m.names  # the axis is not a series


def test_step_wins_over_epoch_and_a_log_without_either_counts_records():
    reader = MetricReader()
    reader.feed(["epoch=1 step=10 loss=1", "epoch=1 step=20 loss=0.5"])
    m = reader.metrics()
    assert m.x_name == "step" and m.get("loss").x == [10.0, 20.0]
    plain = MetricReader()
    plain.feed(["loss=3", "nothing here", "loss=2", "acc=0.5"])
    m = plain.metrics()
    assert m.x_name == INDEX
    assert (m.get("loss").x, m.get("acc").x) == ([1.0, 2.0], [3.0])


def test_chunks_split_mid_line_and_the_runtime_lines_are_skipped():
    text = f"{SUBMITIT}\nstep=1 loss=0.75\nstep=2 loss=0.5\nstep=3 lo"
    reader = MetricReader()
    for i in range(0, len(text), 5):
        reader.feed_text(text[i : i + 5])
    reader.feed_text("ss=0.25\nstep=4 loss=0.125")
    assert reader.metrics().get("loss").y == [0.75, 0.5, 0.25]  # the last line is unfinished
    reader.flush()
    assert reader.metrics().get("loss").y == [0.75, 0.5, 0.25, 0.125]


def test_a_regex_adds_one_series_named_by_its_group():
    torch_example = "Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.205"
    named = MetricReader(r"\[(?P<seen>\d+)/")
    named.feed([torch_example])
    assert named.metrics().get("seen").y == [640.0]
    assert named.metrics().get("loss").y == [2.205]  # the key: value form is read as well
    anon = MetricReader(r"Loss: [\d.]+")  # no group: the whole match, which is no number
    anon.feed([torch_example])
    assert anon.metrics().get("regex") is None
    anon2 = MetricReader(r"\((\d+)%\)")
    anon2.feed([torch_example])
    assert anon2.metrics().get("regex").y == [1.0]
    with pytest.raises(re.error, match=r"unterminated|missing"):
        MetricReader("(")
