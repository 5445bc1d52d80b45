"""The `local` profile describes this machine: detection on captured nvidia-smi/rocm-smi
outputs, the visibility variables honoured, and what a request gets checked against."""

import os
from pathlib import Path

import pytest

from hpcui.errors import UsageError
from hpcui.profiles import local_machine, resolve_profile
from hpcui.profiles.local_machine import LocalMachine, describe, detect
from hpcui.request.plan import resolve
from hpcui.request.resources import Resources

FIXTURES = Path(__file__).parent.parent / "fixtures"
NV = FIXTURES / "nvidia-smi-580-h100"
H100_UUID = "GPU-9a2b51ca-4649-b4d6-4420-1e97534c61e6"


def tools(**outputs: tuple[int, str, str]):
    """`which` and `run` for detect(): only the named tools exist, and print this."""
    calls = []

    def which(name):
        return f"/usr/bin/{name}" if name in outputs else None

    def run(argv):
        calls.append(argv)
        return outputs[argv[0]]

    return which, run, calls


def nvidia(name="idle_query_csv_noheader_nounits"):
    return {"nvidia-smi": (0, (NV / f"{name}.stdout").read_text(), "")}


def test_an_h100_workstation():
    which, run, calls = tools(**nvidia())
    m = detect({}, which, run)
    assert m.vendor == "nvidia" and m.visibility_var == "CUDA_VISIBLE_DEVICES"
    assert [g.name for g in m.gpus] == ["NVIDIA H100 80GB HBM3"]
    assert m.gpu_ids == (H100_UUID,)  # UUIDs: the same GPU whatever CUDA_DEVICE_ORDER says
    assert m.cores == len(os.sched_getaffinity(0)) and m.mem_mb and m.mem_mb > 100
    assert calls[0][0] == "nvidia-smi" and len(calls) == 1
    assert "1x NVIDIA H100 80GB HBM3" in m.summary()


@pytest.mark.parametrize(
    "cvd, count", [("", 0), ("0", 1), ("GPU-9a2b51ca", 1), ("1", 0), ("-1", 0)]
)
def test_cuda_visible_devices_already_set_is_honoured(cvd, count):
    which, run, _ = tools(**nvidia())
    m = detect({"CUDA_VISIBLE_DEVICES": cvd}, which, run)
    assert len(m.gpus) == count
    assert f"CUDA_VISIBLE_DEVICES={cvd} leaves {count} of 1 GPU(s)" in m.notes


def test_driver_trouble_is_a_note_not_a_crash():
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    which, run, _ = tools(**{"nvidia-smi": (9, msg + "\n", "")})
    m = detect({}, which, run)
    assert m.gpus == () and m.vendor is None
    assert m.notes == (f"nvidia-smi failed (exit 9: {msg})", "rocm-smi not found")


def test_an_amd_machine_and_rocr_visible_devices():
    text = (FIXTURES / "rocm-smi" / "mi100_rocm602.json").read_text()
    which, run, _ = tools(**{"rocm-smi": (0, text, "")})
    m = detect({}, which, run)
    assert m.vendor == "amd" and m.visibility_var == "ROCR_VISIBLE_DEVICES"
    assert m.gpu_ids == ("0", "1", "2", "3") and m.gpu_model == "Arcturus GL-XL [Instinct MI100]"
    m2 = detect({"ROCR_VISIBLE_DEVICES": "3,1"}, which, run)
    assert m2.gpu_ids == ("3", "1")


def test_no_tool_at_all_is_a_cpu_machine():
    which, run, calls = tools()
    m = detect({}, which, run)
    assert m.gpus == () and calls == []
    assert m.notes == ("nvidia-smi not found", "rocm-smi not found")


def test_describe_fills_the_profile_and_keeps_what_a_user_set():
    m = LocalMachine(
        cores=16, mem_mb=128 * 1024, vendor="nvidia", gpus=detect({}, *tools(**nvidia())[:2]).gpus
    )
    p = describe(resolve_profile("local"), m)
    assert (p.gpus_per_node, p.cores_per_node, p.mem_per_node) == (1, 16, 128 * 1024)
    assert p.gpu_model == "NVIDIA H100 80GB HBM3"
    assert p.description.startswith("this machine (16 cores, 128 GiB, 1x NVIDIA H100")
    mine = resolve_profile("mine", {"mine": {"base": "local", "cores_per_node": 8}})
    assert describe(mine, m).cores_per_node == 8


def test_describe_says_each_note_once_when_described_again():
    m = LocalMachine(cores=2, mem_mb=4096, notes=("nvidia-smi not found", "rocm-smi not found"))
    p = describe(describe(resolve_profile("local"), m), m)
    assert p.notes == ["no GPU: nvidia-smi not found; rocm-smi not found"]


def h100_box(gpus=1):
    g = detect({}, *tools(**nvidia())[:2]).gpus * gpus
    return describe(
        resolve_profile("local"), LocalMachine(cores=16, mem_mb=131072, vendor="nvidia", gpus=g)
    )


def test_requests_on_a_one_gpu_workstation():
    p = h100_box()
    a = resolve(Resources(gpus=1), p)
    assert (a.nodes, a.tasks_per_node, a.gpus_per_node, a.cpus_per_task) == (1, 1, 1, 16)
    shared = resolve(Resources(gpus=1, tasks_per_node=4), p)  # DDP/FSDP on one GPU
    assert (shared.tasks_per_node, shared.gpus_per_node, shared.cpus_per_task) == (4, 1, 4)
    with pytest.raises(UsageError, match=r"this one machine \(1 GPU\(s\)\); this request needs 2"):
        resolve(Resources(gpus=2), p)
    with pytest.raises(UsageError, match="this one machine"):
        resolve(Resources(nodes=2), p)


def test_four_gpus_is_four_ranks():
    a = resolve(Resources(gpus=4), h100_box(4))
    assert (a.nodes, a.tasks_per_node, a.gpus_per_node, a.cpus_per_task) == (1, 4, 4, 4)


def test_gpus_on_a_cpu_machine_say_why_and_what_to_do():
    p = describe(
        resolve_profile("local"),
        LocalMachine(cores=2, mem_mb=4096, notes=("nvidia-smi not found", "rocm-smi not found")),
    )
    with pytest.raises(UsageError) as err:
        resolve(Resources(gpus=1), p)
    assert str(err.value) == (
        "This machine has no GPU hpcui can use (nvidia-smi not found; rocm-smi not found). "
        "Drop gpus=1; to run 1 rank(s) on CPU (gloo) instead, ask for tasks_per_node=1."
    )
    a = resolve(Resources(tasks_per_node=2), p)
    assert a.tasks_per_node == 2 and a.gpus_per_node == 0


def test_this_machine_is_detected_once(monkeypatch):
    seen = []
    monkeypatch.setattr(
        local_machine, "detect", lambda: seen.append(1) or LocalMachine(cores=1, mem_mb=1)
    )
    local_machine.this_machine.cache_clear()
    try:
        assert local_machine.this_machine() is local_machine.this_machine()
        assert seen == [1]
    finally:
        local_machine.this_machine.cache_clear()
