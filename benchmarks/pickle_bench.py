"""What a call costs to pickle: hpcui's pickler (file names and source lines kept) beside
plain cloudpickle.dumps, for a map over a function of a user module of ~1,000 lines.

    python -m benchmarks.pickle_bench

Prints bytes per call and microseconds per call (median of 5 rounds of 1,000 calls); then
what the pre-submit check of what a call imports (hpcui.submission.needs) adds to one
submit's pickling, here (goal: < 5 ms; the cluster is asked in the probe's round trip,
and a warm submit asks nothing), beside the same pickling without it.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import sized
from hpcui.submission import pickling

FILLER = "".join(f"def unrelated_{i}(x):\n    return x + {i}\n\n\n" for i in range(250))
MODULE = (
    "def train(lr, seed):\n"
    "    def step(i):\n"
    "        return lr * i + seed\n"
    "    return sum(step(i) for i in range(10))\n\n\n" + FILLER
)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "bench_usermod.py").write_text(MODULE)
        sys.path.insert(0, d)
        mod = importlib.import_module("bench_usermod")
        lines = MODULE.count("\n")
        import cloudpickle
        from submitit.core.utils import DelayedSubmission

        calls = [DelayedSubmission(mod.train, 0.1, s) for s in range(sized(1000, 20))]
        print(
            f"pickling {len(calls):,} calls of a function of a {lines}-line user module (by value):"
        )
        with pickling.by_value(mod.train):
            for label, dump in (
                ("cloudpickle.dumps", cloudpickle.dumps),
                ("hpcui", pickling.dumps),
            ):
                sizes, rounds = [], []
                for _ in range(sized(5, 1)):
                    t = time.perf_counter()
                    sizes = [len(dump(c)) for c in calls]
                    rounds.append((time.perf_counter() - t) / len(calls) * 1e6)
                print(
                    f"  {label:18s} {statistics.median(sizes):8.0f} bytes/call "
                    f"{statistics.median(rounds):8.1f} us/call"
                )


def needs_check() -> None:
    """One submit's pickling of a call that uses installed distributions (rich, pydantic),
    with the needs noted and mapped to distributions, beside the same without."""
    from hpcui.submission.needs import Need

    source = (
        "import rich.text\nfrom pydantic import BaseModel\n\n"
        "class Cfg(BaseModel):\n    lr: float = 0.1\n\n"
        "def train(cfg):\n    import json\n    return rich.text.Text(json.dumps(cfg.lr))\n"
    )
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "bench_needs.py").write_text(source)
        sys.path.insert(0, d)
        mod = importlib.import_module("bench_needs")
        calls = [((mod.Cfg(),), {})]
        rows = {"without the check": None, "with the check": True}
        found: list[Need] = []
        for label, want in rows.items():
            rounds = []
            for _ in range(sized(50, 3)):
                needs: list[Need] | None = [] if want else None
                t = time.perf_counter()
                pickling.pickle_calls(mod.train, calls, needs=needs)
                rounds.append((time.perf_counter() - t) * 1e3)
                found = needs or found
            print(f"  one submit's pickling, {label:18s} {statistics.median(rounds):7.2f} ms")
        print(f"  needs found: {', '.join(f'{n.dist} {n.version}' for n in found)}")


if __name__ == "__main__":
    main()
    needs_check()
