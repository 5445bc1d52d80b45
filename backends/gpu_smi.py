"""GPU readings from `nvidia-smi` (CSV query) and `rocm-smi` (JSON), in one shape.

One query serves both uses: what a machine has (index, uuid, model, memory) and what a
job's GPUs do (utilisation, memory used, power). Values a driver cannot report
(`[N/A]`, `[Not Supported]`, `N/A`) become None, never 0: an idle GPU and an unknown one
must look different. Output that is not the expected shape raises GpuQueryError.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "NVIDIA_FIELDS",
    "GpuQueryError",
    "GpuReading",
    "nvidia_query_command",
    "parse_nvidia_query",
    "parse_rocm_json",
    "rocm_query_command",
    "visible",
]

#: the fields of `nvidia-smi --query-gpu`, in order (the captured fixtures use this list)
NVIDIA_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "clocks.sm",
)
_UNKNOWN = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]"}
_UNIT = re.compile(r"\s*(%|MiB|W|MHz|C)$")


class GpuQueryError(ValueError):
    """The tool printed something that is not the table hpcui asked for."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment; memory in MiB, power in W, None where the driver cannot say."""

    index: int
    uuid: str | None = None
    name: str | None = None
    bus_id: str | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_mhz: float | None = None

    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib


def nvidia_query_command() -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"]


def rocm_query_command() -> list[str]:
    return [
        "rocm-smi",
        "--showproductname",
        "--showmeminfo",
        "vram",
        "--showuse",
        "--showpower",
        "--showbus",
        "--showuniqueid",
        "--json",
    ]


def _number(text: str) -> float | None:
    text = _UNIT.sub("", text.strip())
    if text.lower() in _UNKNOWN:
        return None
    try:
        return float(text)
    except ValueError:
        raise GpuQueryError(f"not a number: {text!r}") from None


def _text(text: str) -> str | None:
    text = text.strip()
    return None if text.lower() in _UNKNOWN else text


def parse_nvidia_query(text: str) -> list[GpuReading]:
    """Rows of `nvidia-smi --query-gpu=<NVIDIA_FIELDS> --format=csv[,noheader][,nounits]`."""
    rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r]
    if rows and rows[0] and rows[0][0].strip() == "index":
        rows = rows[1:]  # the header line of `--format=csv`
    out = []
    for row in rows:
        if len(row) != len(NVIDIA_FIELDS):
            raise GpuQueryError(
                f"nvidia-smi printed {len(row)} fields where {len(NVIDIA_FIELDS)} were asked "
                f"for: {', '.join(row)[:200]!r}"
            )
        v = dict(zip(NVIDIA_FIELDS, row, strict=True))
        idx = v["index"].strip()
        if not idx.isdigit():
            raise GpuQueryError(f"nvidia-smi printed a GPU index that is not a number: {idx!r}")
        out.append(
            GpuReading(
                index=int(idx),
                uuid=_text(v["uuid"]),
                name=_text(v["name"]),
                bus_id=_text(v["pci.bus_id"]),
                util_pct=_number(v["utilization.gpu"]),
                mem_util_pct=_number(v["utilization.memory"]),
                mem_used_mib=_number(v["memory.used"]),
                mem_total_mib=_number(v["memory.total"]),
                power_w=_number(v["power.draw"]),
                power_limit_w=_number(v["power.limit"]),
                temp_c=_number(v["temperature.gpu"]),
                sm_mhz=_number(v["clocks.sm"]),
            )
        )
    return out


def _field(card: dict[str, object], *names: str) -> str | None:
    """A card's value under any of `names`, ignoring case (ROCm renamed `Card series`)."""
    lowered = {k.lower(): v for k, v in card.items()}
    for name in names:
        value = lowered.get(name.lower())
        if isinstance(value, str | int | float):
            return str(value)
    return None


def _maybe_number(value: str | None, scale: float = 1.0) -> float | None:
    if value is None:
        return None
    n = _number(value)
    return None if n is None else n * scale


def parse_rocm_json(text: str) -> list[GpuReading]:
    """`rocm-smi ... --json`: one object per `cardN`, values as strings, bytes for memory."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GpuQueryError(f"rocm-smi did not print JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise GpuQueryError("rocm-smi printed JSON that is not an object of cards")
    out = []
    for key, card in data.items():
        m = re.fullmatch(r"card(\d+)", key)
        if m is None or not isinstance(card, dict):
            continue  # "system" and friends
        mib = 1 / (1 << 20)
        out.append(
            GpuReading(
                index=int(m.group(1)),
                uuid=_text(_field(card, "Unique ID") or ""),
                name=_text(_field(card, "Card series", "Card model") or ""),
                bus_id=_text(_field(card, "PCI Bus") or ""),
                util_pct=_maybe_number(_field(card, "GPU use (%)")),
                mem_util_pct=_maybe_number(_field(card, "GPU memory use (%)")),
                mem_used_mib=_maybe_number(_field(card, "VRAM Total Used Memory (B)"), mib),
                mem_total_mib=_maybe_number(_field(card, "VRAM Total Memory (B)"), mib),
                power_w=_maybe_number(
                    _field(
                        card,
                        "Average Graphics Package Power (W)",
                        "Current Socket Graphics Package Power (W)",
                    )
                ),
                power_limit_w=_maybe_number(_field(card, "Max Graphics Package Power (W)")),
                temp_c=_maybe_number(_field(card, "Temperature (Sensor edge) (C)")),
            )
        )
    return sorted(out, key=lambda g: g.index)


def visible(gpus: Sequence[GpuReading], spec: str | None) -> list[GpuReading]:
    """The GPUs a CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES value leaves, in its order.

    As the runtimes read it: indices or (prefixes of) UUIDs, comma-separated; the list
    ends at the first entry that names no GPU; an empty value hides every GPU; unset
    (None) shows all.
    """
    if spec is None:
        return list(gpus)
    out: list[GpuReading] = []
    for token in (t.strip() for t in spec.split(",")):
        match = None
        if token.isdigit():
            match = next((g for g in gpus if g.index == int(token)), None)
        elif len(token) > 4:
            found = [g for g in gpus if g.uuid and g.uuid.lower().startswith(token.lower())]
            match = found[0] if len(found) == 1 else None
        if match is None or match in out:
            break
        out.append(match)
    return out
