"""What a call costs to pickle: hpcui's pickler (file names and source lines kept) beside
plain cloudpickle.dumps, for a map over a function of a user module of ~1,000 lines.

    python -m benchmarks.pickle_bench

Prints bytes per call and microseconds per call (median of 5 rounds of 1,000 calls).
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


if __name__ == "__main__":
    main()
