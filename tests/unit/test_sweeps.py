"""Sweeps: configurations and their keys, the results table, and a sweep on the local
scheduler (real processes): started, failed in part, resumed by name from a new process,
never doubled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from hpcui.errors import UsageError
from hpcui.sweeps import space, table

# -- configurations -----------------------------------------------------------------------


def test_a_grid_is_every_combination_in_order():
    found = space.expand(grid={"lr": [0.1, 0.01], "bs": [32, 64, 128]})
    configs = [c for _k, c in found]
    assert len(configs) == 6
    assert configs[:3] == [{"lr": 0.1, "bs": 32}, {"lr": 0.1, "bs": 64}, {"lr": 0.1, "bs": 128}]
    assert len({k for k, _c in found}) == 6


def test_a_configurations_key_ignores_order_and_tuples():
    assert space.config_key({"a": 1, "b": [1, 2]}) == space.config_key({"b": [1, 2], "a": 1})
    (k1, _), = space.expand(configs=[{"a": (1, 2)}])  # fmt: skip
    assert k1 == space.config_key({"a": [1, 2]})
    assert space.config_key({"a": 1}) != space.config_key({"a": 1.5})


def test_a_configuration_given_twice_is_one_element():
    found = space.expand(configs=[{"x": 1}, {"x": 2}, {"x": 1}])
    assert [c for _k, c in found] == [{"x": 1}, {"x": 2}]


def test_random_draws_repeat_with_their_seed_and_differ_without():
    spec = {"lr": {"log": [1e-5, 1e-1]}, "layers": (1, 4), "opt": ["adam", "sgd"], "n": 20}
    a = space.expand(random=spec, seed=7)
    assert a == space.expand(random=spec, seed=7)
    assert a != space.expand(random=spec, seed=8)
    for _k, c in a:
        assert 1e-5 <= c["lr"] <= 1e-1 and c["layers"] in (1, 2, 3, 4)
        assert c["opt"] in ("adam", "sgd")


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"grid": {"lr": [1]}, "configs": [{"lr": 1}]}, "exactly one of"),
        ({}, "exactly one of"),
        ({"grid": {"lr": []}}, "is empty"),
        ({"grid": {"lr": "0.1"}}, "must be a list"),
        ({"grid": {"bad name": [1]}}, "not a parameter name"),
        ({"configs": [{"x": float("nan")}]}, "finite"),
        ({"configs": [{"x": object()}]}, "must be JSON"),
        ({"random": {"lr": [1]}}, "needs 'n'"),
        ({"random": {"lr": "x", "n": 2}}, "give a list"),
    ],
)
def test_a_bad_space_is_refused_with_what_to_write(kwargs, said):
    with pytest.raises(UsageError, match=said):
        space.expand(**kwargs)


def test_options_and_argv():
    assert space.parse_grid_option("lr=1e-3,1e-4") == ("lr", [0.001, 0.0001])
    assert space.parse_grid_option("opt=adam,true,3") == ("opt", ["adam", True, 3])
    with pytest.raises(UsageError, match="NAME=V1,V2"):
        space.parse_grid_option("lr")
    argv = space.argv_of({"lr": 0.1, "opt": "adam", "layers": [64, 64], "amp": True, "x": False})
    assert argv == ["--lr=0.1", "--opt=adam", "--layers=[64,64]", "--amp"]


# -- the table ----------------------------------------------------------------------------


def test_a_returned_dict_is_one_column_per_key():
    assert table.flatten({"loss": 0.1, "acc": {"top1": 0.9}}) == {
        "result.loss": 0.1,
        "result.acc.top1": 0.9,
    }
    assert table.flatten(3) == {"result": 3}


def test_sorting_puts_rows_without_the_column_last_both_ways():
    rows = [{"state": "FAILED"}, {"state": "COMPLETED", "m": 2.0}, {"state": "X", "m": 1.0}]
    assert [r.get("m") for r in table.sort_rows(rows, "m")] == [1.0, 2.0, None]
    assert [r.get("m") for r in table.sort_rows(rows, "-m")] == [2.0, 1.0, None]
    with pytest.raises(UsageError, match="No column 'nope'"):
        table.sort_rows(rows, "nope")


def test_cells_read_as_people_read_them():
    assert table.cell_text("max_rss", 300 * 2**20) == "300.0M"
    assert table.cell_text("elapsed_s", 3725) == "1:02:05"
    assert table.cell_text("metric.loss", 0.123456) == "0.1235"
    assert table.cell_text("error", None) == "-"
    assert table.cell_text("layers", [64, 64]) == "[64, 64]"
    assert table.cell_text("error", "x" * 50, width=10) == "x" * 9 + "…"


def test_a_filter_keeps_rows_matching_every_word():
    rows = [
        {"lr": 0.1, "state": "COMPLETED", "metric.loss": 0.4},
        {"lr": 0.01, "state": "FAILED", "error": "ValueError: diverged"},
        {"lr": 0.001, "state": "COMPLETED", "metric.loss": 0.2, "flag": True},
    ]
    assert [r["lr"] for r in table.filter_rows(rows, "state=completed")] == [0.1, 0.001]
    assert [r["lr"] for r in table.filter_rows(rows, "lr<0.05 metric.loss<0.3")] == [0.001]
    assert [r["lr"] for r in table.filter_rows(rows, "diverged")] == [0.01]
    assert table.filter_rows(rows, "lr>1") == [] and table.filter_rows(rows, "  ") == rows
    assert table.filter_rows(rows, "flag>0") == []  # a boolean is not a number to compare
    with pytest.raises(UsageError, match="after '<' comes a number"):
        table.filter_rows(rows, "lr<small")


def test_csv_has_every_column_of_every_row():
    text = table.to_csv([{"a": 1}, {"a": 2, "b": [1, 2]}])
    assert text.splitlines() == ["a,b", "1,", '2,"[1, 2]"']


# -- a sweep on the local scheduler (real processes) ---------------------------------------


def train(lr: float, bs: int, flag: str = "") -> dict:
    if lr == 0.5 and not os.path.exists(flag):
        raise ValueError(f"diverged at lr={lr}")
    print(f"step 10 loss {lr * bs:.4f}", flush=True)
    return {"loss": lr * bs, "bs": bs}


@pytest.fixture
def local(local_box):
    import hpcui

    cluster = hpcui.connect("local")
    yield cluster
    cluster.close()


def _counts(sweep) -> dict[str, int]:
    sweep.wait(timeout=120)
    return sweep.counts()


def test_a_sweep_fails_in_part_resumes_by_name_and_never_doubles(local, tmp_path):
    import hpcui

    flag = tmp_path / "fixed"
    grid = {"lr": [0.1, 0.5], "bs": [2, 4]}
    configs = [{"lr": lr, "bs": bs, "flag": str(flag)} for lr in grid["lr"] for bs in grid["bs"]]
    sweep = hpcui.sweep(train, configs=configs, name="lr-scan", cluster=local, time="5m")
    assert len(sweep.last_submitted) == 4
    assert _counts(sweep) == {"COMPLETED": 2, "FAILED": 2}
    rows = {(r["lr"], r["bs"]): r for r in sweep.results()}
    assert rows[(0.1, 4)]["result.loss"] == pytest.approx(0.4)
    assert rows[(0.1, 4)]["metric.loss"] == pytest.approx(0.4)
    assert rows[(0.5, 2)]["error"] == "ValueError: diverged at lr=0.5"

    again = hpcui.sweep(train, configs=configs, name="lr-scan", cluster=local, time="5m")
    assert again.last_submitted == []  # the same name: nothing doubled

    flag.write_text("")  # the bug fixed: the failed two can succeed now
    code = textwrap.dedent("""
        import json, hpcui
        sweep = hpcui.get_sweep("local", "lr-scan")
        jobs = sweep.resume()
        sweep.wait(timeout=120)
        print(json.dumps({"resubmitted": len(jobs), "counts": sweep.counts()}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=os.environ, cwd=tmp_path, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"resubmitted": 2, "counts": {"COMPLETED": 4}}
    fresh = hpcui.get_sweep(local, "lr-scan")
    assert fresh.resume() == []  # all four have results: nothing to do
    rows = fresh.results()
    assert [r["state"] for r in rows] == ["COMPLETED"] * 4
    assert {r["attempts"] for r in rows if r["lr"] == 0.5} == {2}
    assert sorted(r["result.loss"] for r in rows) == pytest.approx([0.2, 0.4, 1.0, 2.0])


def test_a_packed_sweep_keeps_each_elements_own_outcome_and_resumes_it(local, tmp_path):
    import hpcui

    flag = tmp_path / "fixed"
    configs = [{"lr": lr, "bs": bs, "flag": str(flag)} for lr in (0.1, 0.5, 0.2) for bs in (2, 4)]
    sweep = hpcui.sweep(train, configs=configs, name="packed", cluster=local, time="5m",
                        calls_per_task=3)  # fmt: skip
    assert len(sweep.last_submitted) == 2  # six elements, three to a task
    assert _counts(sweep) == {"COMPLETED": 4, "FAILED": 2}  # a failing call fails alone
    rows = {(r["lr"], r["bs"]): r for r in sweep.results()}
    assert rows[(0.5, 4)]["error"] == "ValueError: diverged at lr=0.5"
    assert rows[(0.2, 4)]["result.loss"] == pytest.approx(0.8)
    assert len({r["job_id"] for r in rows.values()}) == 2
    assert not any("metric.loss" in r for r in rows.values())  # one log for three elements

    flag.write_text("")
    again = hpcui.get_sweep(local, "packed")
    assert len(again.resume()) == 1  # the two failed ones, packed into one task
    assert _counts(again) == {"COMPLETED": 6}
    rows = {(r["lr"], r["bs"]): r for r in again.results()}
    assert rows[(0.5, 2)]["result.loss"] == pytest.approx(1.0)
    assert {r["attempts"] for k, r in rows.items() if k[0] == 0.5} == {2}
    assert again.resume() == []


def test_two_processes_resuming_at_once_submit_each_element_once(local, tmp_path):
    import hpcui

    configs = [{"lr": 0.5, "bs": b, "flag": str(tmp_path / "never")} for b in (1, 2, 3)]
    sweep = hpcui.sweep(train, configs=configs, name="race", cluster=local, time="5m")
    assert _counts(sweep) == {"FAILED": 3}
    got: list[int] = []
    threads = [
        threading.Thread(target=lambda: got.append(len(hpcui.get_sweep(local, "race").resume())))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(got) == [0, 3]  # one resubmitted the three; the other found them queued
    assert {e.attempts for e in sweep.elements()} == {2}


def test_a_name_taken_by_another_function_is_refused(local):
    import hpcui

    hpcui.sweep(train, configs=[{"lr": 0.1, "bs": 1}], name="taken", cluster=local)
    with pytest.raises(UsageError, match=r"runs tests\.unit\.test_sweeps\.train"):
        hpcui.sweep(print, configs=[{"x": 1}], name="taken", cluster=local)
    with pytest.raises(UsageError, match="No sweep 'nope'"):
        hpcui.get_sweep(local, "nope")
    with pytest.raises(UsageError, match="1-64 letters"):
        hpcui.sweep(train, configs=[{"lr": 1}], name="../up", cluster=local)


def test_the_cli_starts_shows_and_resumes(local_box, tmp_path, capsys):
    from hpcui.cli import main

    mod = tmp_path / "cli_train.py"
    mod.write_text("def f(x):\n    print(f'loss {x / 10}')\n    return {'twice': 2 * x}\n")
    assert main(["sweep", f"{mod}:f", "--grid", "x=1,2,3", "--name", "cli", "--time", "5m",
                 "--json"]) == 0  # fmt: skip
    started = json.loads(capsys.readouterr().out)
    assert started["elements"] == 3 and len(started["submitted"]) == 3
    import hpcui

    hpcui.get_sweep("local", "cli").wait(timeout=120)
    assert main(["sweep", "show", "cli", "--sort", "-result.twice", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [r["result.twice"] for r in shown["rows"]] == [6, 4, 2]
    assert {"x", "state", "metric.loss", "result.twice"} <= set(shown["columns"])
    assert main(["sweep", "show", "cli", "--filter", "x>1", "--sort", "x"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[1].split()[:2] == ["2", "COMPLETED"]
    assert main(["sweep", "show", "cli", "--csv"]) == 0
    csv_text = capsys.readouterr().out
    assert csv_text.splitlines()[0].startswith("key,x,state,job_id,attempts,result.twice")
    assert main(["sweep", "resume", "cli"]) == 0
    assert "submitted nothing" in capsys.readouterr().out
    assert main(["sweep", "list"]) == 0
    assert "cli  3 configurations" in capsys.readouterr().out
    assert main(["sweep", "show"]) == 2
    assert "needs the sweep's NAME" in capsys.readouterr().err


def test_the_cli_draws_at_random_and_packs(local_box, tmp_path, capsys):
    from hpcui.cli import main

    mod = tmp_path / "cli_rand.py"
    mod.write_text("def f(lr, bs, drop):\n    return {'lr': lr, 'bs': bs, 'drop': drop}\n")
    space = '{"lr": {"log": [1e-5, 1e-2]}, "bs": [16, 32], "drop": {"uniform": [0, 0.5]}, "n": 6}'
    argv = ["sweep", f"{mod}:f", "--random", space, "--seed", "3", "--name", "rand",
            "--calls-per-task", "3", "--time", "5m", "--json"]  # fmt: skip
    assert main(argv) == 0
    started = json.loads(capsys.readouterr().out)
    assert started["elements"] == 6 and len(started["submitted"]) == 2  # 3 to a task
    import hpcui

    sweep = hpcui.get_sweep("local", "rand")
    sweep.wait(timeout=120)
    rows = sweep.results(metrics=False)
    assert {r["state"] for r in rows} == {"COMPLETED"}
    assert all(1e-5 <= r["result.lr"] <= 1e-2 and r["result.bs"] in (16, 32) for r in rows)
    assert all(0 <= r["result.drop"] <= 0.5 for r in rows)
    from hpcui.sweeps import space as sweep_space

    want = {"lr": {"log": [1e-5, 1e-2]}, "bs": [16, 32], "drop": (0, 0.5), "n": 6}
    drawn = [c for _, c in sweep_space.expand(random=want, seed=3)]  # the API's own draws
    assert [(r["lr"], r["drop"]) for r in rows] == [(c["lr"], c["drop"]) for c in drawn]
    assert main(["sweep", f"{mod}:f", "--random", '{"lr": [1]}', "--name", "r2"]) == 2
    assert "the draws' count" in capsys.readouterr().err
