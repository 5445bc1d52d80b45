"""A check on a machine with a GPU (not part of the suite: CI has none): the embedded
`local` cluster sees the GPU through the real nvidia-smi, and jobs submitted through the
public API run on it — one rank with NCCL, two ranks sharing the GPU (gloo, said once),
and `launcher="torchrun"` — with each job's result read back. Prints a line per job.

    python scripts/gpu_check.py            # on a GPU machine (without one: the CPU forms)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def all_reduce() -> dict[str, object]:
    import torch
    import torch.distributed as dist

    from hpcui import distributed as hd

    _local_rank, rank, world, device = hd.setup()
    x = torch.ones(1024, 1024, device=device) * (rank + 1)
    dist.all_reduce(x)
    out = {
        "rank": rank,
        "world": world,
        "device": str(device),
        "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "backend": dist.get_backend(),
        "sum": float(x[0, 0]),
    }
    dist.destroy_process_group()
    return out


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="hpcui-gpu-check-"))
    cfg = base / "config.toml"
    cfg.write_text(f'[clusters.local]\nscheduler = "local"\nremote_base = "{base}/jobs"\n')
    os.environ.update(HPCUI_CONFIG=str(cfg), HPCUI_DATA_DIR=str(base / "data"), HPCUI_AGENT="off")
    sys.path.insert(0, str(ROOT))
    import hpcui
    from hpcui.profiles.local_machine import this_machine

    print("this machine:", this_machine())
    local = hpcui.connect("local")
    gpus = local.profile.gpus_per_node or 0
    forms = (
        [("1 rank, 1 GPU", {"gpus": 1}), ("2 ranks share 1 GPU", {"gpus": 1, "tasks_per_node": 2}),
         ("torchrun, 1 GPU", {"gpus": 1, "launcher": "torchrun"})]
        if gpus
        else [("2 CPU ranks", {"tasks_per_node": 2})]
    )  # fmt: skip
    failed = 0
    for label, resources in forms:
        t0 = time.perf_counter()
        try:
            results = local.submit(all_reduce, time="10m", **resources).results(timeout=600)
        except hpcui.HpcuiError as exc:
            failed += 1
            print(f"{label:24} FAILED: {exc}")
            continue
        took = time.perf_counter() - t0
        world = results[0]["world"]
        ok = all(r["sum"] == world * (world + 1) / 2 for r in results)
        failed += not ok
        print(f"{label:24} {'ok' if ok else 'WRONG'} in {took:5.1f} s: {results}")
    local.close()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
