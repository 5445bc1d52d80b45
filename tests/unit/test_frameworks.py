"""Frameworks before a job queues, from the code's text alone (no framework installed
here): launcher="auto", Lightning Trainers that do not fit the allocation, Accelerate
configs of another shape; and the rank variables every task exports for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcui.backends.batch import BatchSpec
from hpcui.backends.launch import (
    LAUNCHER_CONFIG,
    LAUNCHERS,
    PER_NODE,
    accelerate_argv,
    deepspeed_argv,
)
from hpcui.backends.pbs.script import render_script as render_pbs
from hpcui.backends.slurm.script import render_script as render_slurm
from hpcui.distributed import export_rank_env, rank_info
from hpcui.errors import UsageError
from hpcui.node.runscript import run_script
from hpcui.profiles import load_profile
from hpcui.request.fields import REQUEST_FIELDS
from hpcui.request.plan import batch_spec, explain, resolve
from hpcui.request.resources import Resources
from hpcui.submission import frameworks as fw

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "frameworks"


def script(text: str, name: str = "train.py") -> fw.CodeText:
    found = fw.code_text(run_script, [text, name, []])
    assert found is not None
    return found


LIGHTNING = """\
import lightning as L
def main():
    trainer = L.Trainer(accelerator="gpu", devices={devices}, num_nodes={nodes}, strategy="ddp")
    trainer.fit(model)
"""


@pytest.mark.parametrize(
    ("source", "devices", "nodes"),
    [
        (LIGHTNING.format(devices=4, nodes=2), 4, 2),
        (LIGHTNING.format(devices="[0, 1]", nodes=1), 2, 1),
        (LIGHTNING.format(devices='"0,1,2"', nodes=3), 3, 3),
        (LIGHTNING.format(devices='"auto"', nodes="n"), None, None),
        ("from lightning.pytorch import Trainer as T\nT(devices=2)\n", 2, 1),
        ("import pytorch_lightning as pl\npl.Trainer(devices=8, num_nodes=4)\n", 8, 4),
        ("from lightning import pytorch as pl\npl.Trainer(devices=1, **kw)\n", 1, None),
    ],
)
def test_lightning_trainers_are_read_from_the_text(source, devices, nodes):
    (trainer,) = fw.lightning_trainers(script(source))
    assert (trainer.devices, trainer.num_nodes) == (devices, nodes)


def test_a_transformers_trainer_or_another_trainer_is_not_lightnings():
    hf = "from transformers import Trainer\nTrainer(model=m, args=a)\n"
    own = "class Trainer: ...\nTrainer(devices=3)\n"
    assert fw.lightning_trainers(script(hf)) == []
    assert fw.lightning_trainers(script(own)) == []


def test_a_trainer_that_does_not_fit_is_refused_with_the_fix():
    code = script(LIGHTNING.format(devices=4, nodes=2))
    fw.check_lightning(code, nodes=2, ranks_per_node=4)  # fits: nothing said
    with pytest.raises(UsageError) as err:
        fw.check_lightning(code, nodes=2, ranks_per_node=2)
    text = str(err.value)
    assert "train.py (line 3)" in text and "devices=4" in text
    assert "Trainer(devices=2, num_nodes=2)" in text and "tasks_per_node=4" in text
    with pytest.raises(UsageError, match="num_nodes=2"):
        fw.check_lightning(code, nodes=1, ranks_per_node=4)
    # num_nodes left out is Lightning's 1: two nodes do not fit it
    with pytest.raises(UsageError, match="num_nodes=1"):
        fw.check_lightning(script("import lightning as L\nL.Trainer(devices=2)\n"), nodes=2,
                           ranks_per_node=2)  # fmt: skip


def train_in_a_callable():
    import lightning as L

    return build(L)


def build(L):  # a helper the callable calls: its Trainer is read too
    return L.Trainer(devices=3, num_nodes=1)


def test_a_callables_own_body_and_its_helpers_are_read():
    code = fw.code_text(train_in_a_callable)
    assert code is not None and code.where.endswith("train_in_a_callable")
    (trainer,) = fw.lightning_trainers(code)
    assert trainer.devices == 3
    assert trainer.line == build.__code__.co_firstlineno + 1  # the file's line, not the body's


@pytest.mark.parametrize(
    ("source", "launcher"),
    [
        ("import lightning as L\n", "lightning"),
        ("from pytorch_lightning import Trainer\n", "lightning"),
        ("import deepspeed\nimport torch\n", "deepspeed"),
        ("from accelerate import Accelerator\n", "accelerate"),
        ("from transformers import Trainer, TrainingArguments\n", "accelerate"),
        ("import torch\n", "submitit"),
        ("def broken(:\n", "submitit"),
    ],
)
def test_auto_picks_the_launcher_from_the_imports_and_says_why(source, launcher):
    chosen, why = fw.choose_launcher(script(source))
    assert chosen == launcher
    assert why.startswith("launcher=auto: train.py") and why.endswith(launcher)


def test_auto_is_resolved_before_planning_and_planning_auto_is_an_error():
    req = Resources.from_kwargs(launcher="auto", nodes=2)
    code = ("from accelerate import Accelerator\n", "t.py", [])
    got, text = fw.resolve_launcher(req, {}, run_script, [(code, {})])
    assert got.launcher == "accelerate" and got.nodes == 2 and text is not None
    assert text.where == "t.py"
    plain = Resources(gpus=2)
    assert fw.resolve_launcher(plain, {}, run_script, [(code, {})])[0] is plain
    with pytest.raises(UsageError, match="chosen from the code"):
        resolve(req, load_profile("dev"))


def test_the_example_accelerate_configs_fit_two_nodes_of_two():
    for name in ("accelerate_config.yaml", "accelerate_fsdp.yaml"):
        data = (EXAMPLES / name).read_bytes()
        fw.check_accelerate_config(data, name, nodes=2, ranks_per_node=2)
        with pytest.raises(UsageError) as err:
            fw.check_accelerate_config(data, name, nodes=1, ranks_per_node=8)
        assert "num_machines: 2 (this job: 1)" in str(err.value)
        assert "Set num_machines: 1 and num_processes: 8" in str(err.value)


@pytest.mark.parametrize("kind", ["NO", "MULTI_CPU", "DEEPSPEED", "TPU"])
def test_an_accelerate_config_hpcui_cannot_launch_per_node_is_refused(kind):
    with pytest.raises(UsageError, match=f"distributed_type: {kind}"):
        fw.check_accelerate_config(f"distributed_type: {kind}\n".encode(), "a.yaml",
                                   nodes=2, ranks_per_node=2)  # fmt: skip
    nested = b"distributed_type: FSDP\nfsdp_config:\n  num_processes: 99\n"
    fw.check_accelerate_config(nested, "a.yaml", nodes=2, ranks_per_node=2)  # nested: not read


def test_the_launcher_config_travels_only_with_accelerate(tmp_path: Path):
    profile = load_profile("dev")
    cfg = tmp_path / "acc.yaml"
    cfg.write_text("distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 8\n")
    req = Resources.from_kwargs(launcher="accelerate", gpus=8, launcher_config=str(cfg))
    alloc = resolve(req, profile)
    assert fw.launcher_files(req, alloc, None) == {LAUNCHER_CONFIG: cfg.read_bytes()}
    other = Resources.from_kwargs(gpus=8, launcher_config=str(cfg))
    with pytest.raises(UsageError, match="read by launcher='accelerate' only"):
        fw.launcher_files(other, resolve(other, profile), None)
    missing = Resources.from_kwargs(launcher="accelerate", gpus=8, launcher_config="/no/such")
    with pytest.raises(UsageError, match="Cannot read the launcher config /no/such"):
        fw.launcher_files(missing, resolve(missing, profile), None)


def test_accelerate_is_one_launcher_per_node_on_slurm_and_pbs():
    assert PER_NODE <= set(LAUNCHERS) and "auto" in LAUNCHERS
    field = next(f for f in REQUEST_FIELDS if f.keyword == "launcher")
    assert field.choices == LAUNCHERS
    alloc = resolve(Resources.from_kwargs(gpus=8, launcher="accelerate"), load_profile("dev"))
    assert (alloc.nodes, alloc.tasks_per_node, alloc.num_tasks) == (2, 1, 8)
    assert "(accelerate: one launcher per node)" in explain(alloc)
    spec = batch_spec(alloc, folder="/j", token="t", python="/v/python")
    slurm = render_slurm(spec)
    assert "export HPCUI_LAUNCHER=accelerate HPCUI_NPROC_PER_NODE=4" in slurm
    assert "-m hpcui.node.torchrun agent /j" in slurm
    assert "accelerate.commands.launch" in slurm and "--machine_rank=$NODE_RANK" in slurm
    pbs = render_pbs(spec)
    assert "HPCUI_LAUNCHER=accelerate" in pbs and "hpcui.node.torchrun agent" in pbs
    for name in ("lightning", "deepspeed"):  # one scheduler task per rank, as submitit
        alloc = resolve(Resources.from_kwargs(gpus=8, launcher=name), load_profile("dev"))
        assert (alloc.tasks_per_node, alloc.num_tasks) == (4, 8)
        text = render_pbs(batch_spec(alloc, folder="/j", token="t"))
        assert "hpcui.node.torchrun" not in text and "HPCUI_LAUNCHER" not in text
    with pytest.raises(ValueError, match="not available on PBS"):
        render_pbs(BatchSpec(folder="/j", token="t", name="n", launcher="auto"))


def test_accelerate_argv_is_the_guides_command_with_this_nodes_rank():
    argv = accelerate_argv("py", nnodes=2, nproc_per_node=4, node_rank=1, main_ip="n1",
                           main_port=21234, config_file="/j/c.yaml", module="m", args=["w"])  # fmt: skip
    assert argv[:6] == [
        "py",
        "-u",
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        "/j/c.yaml",
    ]
    assert argv[6:] == ["--num_machines=2", "--num_processes=8", "--machine_rank=1",
                        "--main_process_ip=n1", "--main_process_port=21234", "--module", "m", "w"]  # fmt: skip
    plain = accelerate_argv("py", nnodes=1, nproc_per_node=2, node_rank=0, main_ip="n1",
                            main_port=1, config_file=None, module="m", args=[])  # fmt: skip
    assert "--multi_gpu" in plain and "--config_file" not in plain


SLURM = {
    "SLURM_JOB_ID": "4711", "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
    "SLURM_NTASKS": "8", "SLURM_STEP_TASKS_PER_NODE": "4(x2)", "SLURM_STEP_NODELIST": "localhost",
}  # fmt: skip


def test_every_task_exports_torchs_rank_variables_once():
    env = dict(SLURM)
    info = export_rank_env(env)
    assert (info.rank, info.node_rank, info.source) == (5, 1, "slurm")
    want = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
            "NODE_RANK": "1", "GROUP_RANK": "1", "MASTER_ADDR": "localhost",
            "MASTER_PORT": str(info.master_port), "HPCUI_RANK_SOURCE": "slurm"}  # fmt: skip
    assert {k: env[k] for k in want} == want
    again = rank_info(env)  # hpcui.distributed.setup() later: the same rank, still "slurm"
    assert (again.rank, again.master_port, again.source, again.node_rank) == (
        5,
        info.master_port,
        "slurm",
        1,
    )
    pbs = {"PBS_JOBID": "9.srv", "HPCUI_RANK": "3", "HPCUI_LOCAL_RANK": "1", "HPCUI_WORLD_SIZE": "4",
           "HPCUI_LOCAL_WORLD_SIZE": "2", "HPCUI_NODE_RANK": "1", "HPCUI_MASTER_ADDR": "pbs-n1"}  # fmt: skip
    export_rank_env(pbs)
    assert (pbs["RANK"], pbs["NODE_RANK"], pbs["MASTER_ADDR"]) == ("3", "1", "pbs-n1")
    torchrun = {"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "a",
                "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "x"}  # fmt: skip
    before = dict(torchrun)
    export_rank_env(torchrun)  # a launcher set them: left as they are
    assert {k: torchrun[k] for k in before} == before and "NODE_RANK" not in torchrun
    single: dict[str, str] = {}
    assert export_rank_env(single).source == "single" and single == {}


def test_deepspeed_uses_its_own_launcher_on_one_node_and_srun_tasks_on_several():
    one = resolve(Resources.from_kwargs(gpus=2, nodes=1, launcher="deepspeed"), load_profile("dev"))
    assert (one.tasks_per_node, one.num_tasks) == (1, 2)
    assert "(deepspeed: one launcher per node)" in explain(one)
    script = render_slurm(batch_spec(one, folder="/j", token="t"))
    assert "export HPCUI_LAUNCHER=deepspeed HPCUI_NPROC_PER_NODE=2" in script
    assert "deepspeed.launcher.runner --num_gpus=2" in script and "--no_local_rank" in script
    assert "-m hpcui.node.torchrun agent /j" in script
    two = resolve(Resources.from_kwargs(gpus=8, launcher="deepspeed"), load_profile("dev"))
    assert (two.nodes, two.tasks_per_node, two.num_tasks) == (2, 4, 8)
    script = render_slurm(batch_spec(two, folder="/j", token="t"))
    assert "# launcher deepspeed: one task per rank" in script and "HPCUI_LAUNCHER" not in script
    argv = deepspeed_argv("py", nproc_per_node=4, main_ip="n1", main_port=21000, module="m",
                          args=["worker", "/j"])  # fmt: skip
    assert argv == ["py", "-u", "-m", "deepspeed.launcher.runner", "--num_gpus=4",
                    "--master_addr=n1", "--master_port=21000", "--no_local_rank", "--module",
                    "m", "worker", "/j"]  # fmt: skip


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"


def test_the_frameworks_real_logs_are_read_as_metrics_and_progress():
    from hpcui.logs.progress import read_progress
    from hpcui.metrics import MetricReader

    ds = MetricReader()
    ds.feed_text((FIXTURES / "deepspeed-0.19.8-zero2-rank0.out").read_text())
    metrics = ds.metrics()
    lr = metrics.get("lr")
    assert metrics.x_name == "step" and lr is not None
    assert [x for x in lr.x if x > 0] == [2.0, 4.0, 6.0, 8.0, 10.0] and set(lr.y) == {0.01}
    hf = MetricReader()
    hf.feed_text((FIXTURES / "transformers-5.24.0-trainer-rank0.out").read_text())
    loss = hf.metrics().get("loss")
    assert loss is not None and loss.x == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    assert loss.y == [7.475, 6.488, 3.567, 3.11, 2.231, 1.658]
    bar = read_progress((FIXTURES / "transformers-5.24.0-trainer-rank0.err").read_text())
    assert bar is not None and (bar.done, bar.total, bar.source) == (24, 24, "tqdm")


def test_lightnings_csvlogger_file_is_read_as_series_against_the_step():
    from hpcui.metrics import MetricReader

    reader = MetricReader()
    assert reader.feed_csv((FIXTURES / "lightning-2.6.6-csvlogger-metrics.csv").read_text())
    metrics = reader.metrics()
    assert metrics.x_name == "step" and set(metrics.names) == {"train_loss", "val_loss", "lr"}
    train, val = metrics.get("train_loss"), metrics.get("val_loss")
    assert train is not None and val is not None
    assert train.x == [4.0, 9.0, 14.0, 19.0, 24.0, 29.0, 34.0, 39.0, 44.0]
    assert train.y[0] == 3.8264408111572266 and train.y[-1] == 0.0012511077802628279
    assert val.x == [15.0, 31.0, 47.0] and val.y[-1] == 0.0007732412777841091
    empty = MetricReader()
    assert not empty.feed_csv("epoch,step,run\n") and not empty.feed_csv("")


def test_the_submit_forms_preview_shows_the_launcher_auto_chooses(tmp_path: Path, monkeypatch):
    from hpcui.clusters.api import connect
    from hpcui.tui.screens.submit import SubmitForm, preview_plan

    cfg = tmp_path / "c.toml"  # a Slurm site by its profile: the preview needs no network
    cfg.write_text('[clusters.site]\nhost = "127.0.0.1"\nprofile = "dev"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    train = tmp_path / "train.py"
    train.write_text("from accelerate import Accelerator\nAccelerator()\n")
    form = SubmitForm("site", str(train), resources={"launcher": "auto", "gpus": "8"})
    summary, script, alloc = preview_plan(connect("site"), form)
    assert alloc.launcher == "accelerate" and "(accelerate: one launcher per node)" in summary
    assert "HPCUI_LAUNCHER=accelerate HPCUI_NPROC_PER_NODE=4" in script


def test_the_local_cluster_refuses_a_launcher_per_node(local_box):
    from hpcui.clusters.api import connect

    for launcher in ("torchrun", "accelerate"):
        with pytest.raises(UsageError, match=r"local cluster .* does not run"):
            connect("local").plan(launcher=launcher, gpus=0)
    assert connect("local").plan(launcher="lightning", tasks_per_node=2).num_tasks == 2
