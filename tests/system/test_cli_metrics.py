"""Issue 35, `hpcui metrics JOB... [--json|--csv]` on the local box (real local jobs that
print as training loops do), two jobs side by side, and a bad pattern refused."""

from __future__ import annotations

import csv
import io
import json

from tests.system.test_cli_wait import hpcui, submit

TASKS = """
def train(lr):
    loss = 1.0
    for step in range(1, 6):
        loss *= 1 - lr
        print(f"step={step} loss={loss:.4f} lr={lr}", flush=True)
        if step % 2 == 0:
            print({"eval_acc": step * 10, "step": step}, flush=True)
    return loss
"""


def setup(tmp):
    (tmp / "c.toml").write_text(
        f'[clusters.box]\nscheduler = "local"\nremote_base = "{tmp}/base"\n'
    )
    (tmp / "traintasks.py").write_text(TASKS)


def run_to_end(tmp, lr):
    job = submit(tmp, "traintasks:train", "--args", f"[{lr}]")
    done = hpcui(tmp, "wait", job)
    assert done.returncode == 0, done.stderr
    return job


def test_metrics_of_two_jobs_as_json_csv_and_text(tmp_path):
    setup(tmp_path)
    a, b = run_to_end(tmp_path, 0.5), run_to_end(tmp_path, 0.25)
    done = hpcui(tmp_path, "metrics", a, b, "--json")
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)
    assert first["job"] == f"box:{a}" and first["x_name"] == "step"
    series = {s["name"]: s for s in first["series"]}
    assert set(series) == {"loss", "lr", "eval_acc"}
    assert series["loss"]["x"] == [1, 2, 3, 4, 5]
    assert series["loss"]["y"] == [0.5, 0.25, 0.125, 0.0625, 0.0312]
    assert series["eval_acc"] == {"name": "eval_acc", "x": [2, 4], "y": [20, 40]}
    assert {s["name"]: s for s in second["series"]}["loss"]["y"][0] == 0.75

    done = hpcui(tmp_path, "metrics", a, b, "--csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert rows[0] == ["job", "step", "loss", "lr", "eval_acc"]
    assert rows[1:3] == [
        [f"box:{a}", "1", "0.5", "0.5", ""],
        [f"box:{a}", "2", "0.25", "0.5", "20"],
    ]
    assert len(rows) == 1 + 5 + 5 and rows[6][0] == f"box:{b}"

    done = hpcui(tmp_path, "metrics", a)
    assert done.returncode == 0, done.stderr
    loss = next(line.split() for line in done.stdout.splitlines() if line.startswith("loss"))
    assert loss[:4] == ["loss", "5", "5", "0.5"]  # name, points, last step, first value
    assert [float(v) for v in loss[4:]] == [0.0312, 0.0312, 0.5]  # last, min, max


def test_metrics_says_what_it_reads_and_refuses_a_bad_pattern(tmp_path):
    setup(tmp_path)
    (tmp_path / "quiet.py").write_text("def hush():\n    print('nothing to plot')\n")
    job = submit(tmp_path, "quiet:hush")
    assert hpcui(tmp_path, "wait", job).returncode == 0
    done = hpcui(tmp_path, "metrics", job)
    assert done.returncode == 0, done.stderr
    assert "no metrics in the log yet" in done.stdout and "--pattern REGEX" in done.stdout
    bad = hpcui(tmp_path, "metrics", job, "--pattern", "(")
    assert bad.returncode == 2 and "--pattern is not a regular expression" in bad.stderr
    both = hpcui(tmp_path, "metrics", job, "--json", "--csv")
    assert both.returncode == 2 and "one of --json and --csv" in both.stderr


RANKED = """
def train_ranked():
    import submitit

    rank = submitit.JobEnvironment().global_rank
    loss = 1.0
    for step in range(1, 4):
        loss *= 0.5 if rank == 0 else 0.9  # rank 1 lags: what the comparison shows
        print(f"step={step} loss={loss:.4f}", flush=True)
    return rank
"""


def test_metrics_of_every_rank_rank_0_beside_the_others(tmp_path):
    """Issue 49: several ranks' metrics compared (the CLI; the app's A draws them)."""
    setup(tmp_path)
    (tmp_path / "rankedtasks.py").write_text(RANKED)
    job = submit(tmp_path, "rankedtasks:train_ranked", "--tasks-per-node", "2")
    done = hpcui(tmp_path, "wait", job)
    assert done.returncode == 0, done.stderr
    done = hpcui(tmp_path, "metrics", job, "--all-ranks", "--json")
    assert done.returncode == 0, done.stderr
    ranks = json.loads(done.stdout)
    assert [m["job"] for m in ranks] == [f"box:{job} rank 0", f"box:{job} rank 1"]
    last = [{s["name"]: s["y"][-1] for s in m["series"]}["loss"] for m in ranks]
    assert last == [0.125, 0.729]
    text = hpcui(tmp_path, "metrics", job, "--all-ranks").stdout
    assert "2 ranks · last values, rank 0 vs the others" in text
    row = next(line for line in text.splitlines() if line.startswith("loss"))
    assert row.split() == ["loss", "0.125", "0.729", "(rank", "1)", "0.729", "(rank", "1)", "2/2"]
    refused = hpcui(tmp_path, "metrics", job, "--all-ranks", "--rank", "1")
    assert refused.returncode == 2 and "one of --rank and --all-ranks" in refused.stderr


CSV_LOGGER = """
def train_csv(path):
    # the file Lightning's CSVLogger writes: a header, a cell empty where nothing was logged
    with open(path, "w") as fh:
        fh.write("epoch,step,train_loss,val_loss\\n")
        for step in (1, 3, 5):
            fh.write(f"0,{step},{1 / step:.4f},\\n")
        fh.write("0,5,,0.25\\n")
    print("nothing on stdout to plot", flush=True)
"""


def test_metrics_of_a_loggers_file_instead_of_the_log(tmp_path):
    setup(tmp_path)
    (tmp_path / "csvtasks.py").write_text(CSV_LOGGER)
    path = tmp_path / "metrics.csv"
    job = submit(tmp_path, "csvtasks:train_csv", "--args", json.dumps([str(path)]))
    assert hpcui(tmp_path, "wait", job).returncode == 0
    done = hpcui(tmp_path, "metrics", job, "--file", str(path), "--json")
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)
    series = {s["name"]: s for s in found["series"]}
    assert found["x_name"] == "step" and set(series) == {"train_loss", "val_loss"}
    assert series["train_loss"]["x"] == [1, 3, 5] and series["train_loss"]["y"][0] == 1.0
    assert series["val_loss"] == {"name": "val_loss", "x": [5], "y": [0.25]}
    gone = hpcui(tmp_path, "metrics", job, "--file", str(path) + ".gone")
    assert gone.returncode == 2 and "cannot read" in gone.stderr and "CSVLogger" in gone.stderr
    both = hpcui(tmp_path, "metrics", job, "--file", str(path), "--rank", "1")
    assert both.returncode == 2 and "--file reads that one file" in both.stderr
