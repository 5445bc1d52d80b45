"""nvidia-smi and rocm-smi parsed from verbatim captured outputs (tests/fixtures/)."""

from pathlib import Path

import pytest

from hpcui.backends.gpu_smi import (
    NVIDIA_FIELDS,
    GpuQueryError,
    GpuReading,
    nvidia_query_command,
    parse_nvidia_query,
    parse_rocm_json,
    visible,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
NV = FIXTURES / "nvidia-smi-580-h100"
ROCM = FIXTURES / "rocm-smi"
H100_UUID = "GPU-9a2b51ca-4649-b4d6-4420-1e97534c61e6"


def test_the_query_is_the_captured_one():
    readme = (NV / "README.md").read_text()
    assert f"Q = `{','.join(NVIDIA_FIELDS)}`" in readme
    assert nvidia_query_command()[-1] == "--format=csv,noheader,nounits"


def test_idle_h100():
    [gpu] = parse_nvidia_query((NV / "idle_query_csv_noheader_nounits.stdout").read_text())
    assert gpu.index == 0 and gpu.uuid == H100_UUID
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.bus_id == "00000000:00:06.0"
    assert gpu.util_pct == 0 and gpu.mem_used_mib == 0 and gpu.mem_total_mib == 81559
    assert gpu.power_w == pytest.approx(109.67) and gpu.power_limit_w == 700


def test_busy_h100():
    [gpu] = parse_nvidia_query((NV / "busy_query_csv_noheader_nounits.stdout").read_text())
    assert gpu.util_pct == 100 and gpu.mem_util_pct == 30
    assert gpu.mem_used_mib == 6735 and gpu.mem_pct == pytest.approx(8.26, abs=0.01)
    assert gpu.power_w == pytest.approx(694.42) and gpu.temp_c == 56 and gpu.sm_mhz == 1335


def test_header_and_units_form_reads_the_same():
    [with_units] = parse_nvidia_query((NV / "idle_query_csv.stdout").read_text())
    [plain] = parse_nvidia_query((NV / "idle_query_csv_noheader_nounits.stdout").read_text())
    assert with_units.mem_total_mib == plain.mem_total_mib == 81559
    assert with_units.util_pct == 0 and with_units.sm_mhz == 375


def test_not_available_values_are_none_not_zero():
    line = f"3, {H100_UUID}, NVIDIA A100-SXM4-40GB, 00000000:07:00.0, [N/A], [N/A], 10, 40960, [Not Supported], 400.00, 40, 1410\n"
    [gpu] = parse_nvidia_query(line)
    assert gpu.index == 3 and gpu.util_pct is None and gpu.power_w is None
    assert gpu.mem_used_mib == 10


@pytest.mark.parametrize(
    "text, message",
    [
        ((NV / "cvd_query.stdout").read_text(), "4 fields where 12"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            "1 fields",
        ),
        (f"x, {H100_UUID}, n, b, 0, 0, 0, 1, 1, 1, 1, 1", "index that is not a number"),
        (f"0, {H100_UUID}, n, b, lots, 0, 0, 1, 1, 1, 1, 1", "not a number: 'lots'"),
    ],
)
def test_other_shapes_are_refused(text, message):
    with pytest.raises(GpuQueryError, match=message):
        parse_nvidia_query(text)


def test_no_gpu_lines_is_no_gpus():
    assert parse_nvidia_query("") == []


def test_rocm_mi100():
    gpus = parse_rocm_json((ROCM / "mi100_rocm602.json").read_text())
    assert [g.index for g in gpus] == [0, 1, 2, 3]  # "system" is not a card
    g = gpus[1]
    assert g.name == "Arcturus GL-XL [Instinct MI100]" and g.bus_id == "0000:A3:00.0"
    assert g.mem_total_mib == pytest.approx(34342961152 / 2**20)
    assert g.mem_used_mib == pytest.approx(6750208 / 2**20)
    assert g.util_pct == 0 and g.power_w == 44 and g.power_limit_w == 290
    assert g.uuid == "0x4edfb117a17a07d" and g.temp_c == 55


def test_rocm_key_case_changed_in_6_1():
    [g] = parse_rocm_json((ROCM / "rx6700xt_rocm612.json").read_text())
    assert g.name == "Navi 22 [Radeon RX 6700/6700 XT / 6800M]"  # "Card Series"
    assert g.uuid is None  # "N/A"
    assert g.mem_used_mib == pytest.approx(1572745216 / 2**20)


@pytest.mark.parametrize("text", ["", "ERROR: GPU[0] : not supported", "[1, 2]"])
def test_rocm_not_json_is_refused(text):
    with pytest.raises(GpuQueryError, match="rocm-smi"):
        parse_rocm_json(text)


FOUR = [GpuReading(index=i, uuid=f"GPU-{i}aaa-{i}") for i in range(4)]


@pytest.mark.parametrize(
    "spec, indices",
    [
        (None, [0, 1, 2, 3]),
        ("", []),
        ("2,0", [2, 0]),
        ("1, 3", [1, 3]),
        ("GPU-3aaa", [3]),
        ("1,7,2", [1]),  # the list ends at the first entry that names no GPU
        ("-1", []),
        ("0,0", [0]),
    ],
)
def test_visible_devices_as_the_runtime_reads_them(spec, indices):
    assert [g.index for g in visible(FOUR, spec)] == indices
