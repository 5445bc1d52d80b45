"""Remote tracebacks keep the user's file names and source lines with every cloudpickle
release hpcui allows: the lowest (3.0.0), the last that kept file names itself (3.1.2),
and the one installed here (the lock's, or the newest under `scripts/test --newest`).

Each release is a real wheel from PyPI, put first on a fresh interpreter's path: one
interpreter pickles the user's function with hpcui's pickler, another, where the user's
file no longer exists (as on a node), unpickles and runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".test-wheels"
RELEASES = ["3.0.0", "3.1.2", "installed"]

MODULE = textwrap.dedent(
    """\
    def helper(x):
        raise ValueError(f"boom {x}")


    def outer(x):
        return helper(x) + 1
    """
)
PICKLE = textwrap.dedent(
    """\
    import sys
    sys.path.insert(0, sys.argv[1])
    import cloudpickle, usermod
    from hpcui.submission import pickling
    with pickling.by_value(usermod.outer):
        data = pickling.dumps(usermod.outer)
    open(sys.argv[2], "wb").write(data)
    print(cloudpickle.__version__)
    """
)
RUN = textwrap.dedent(
    """\
    import pickle, sys, traceback
    fn = pickle.load(open(sys.argv[1], "rb"))
    try:
        fn(3)
    except ValueError:
        print(traceback.format_exc())
    """
)


def wheel(release: str) -> Path | None:
    """The release's wheel, downloaded once into .test-wheels (None: the installed one)."""
    if release == "installed":
        return None
    found = sorted(WHEELS.glob(f"cloudpickle-{release}-*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "-d", str(WHEELS), f"cloudpickle=={release}"],
            check=True, timeout=120,
        )  # fmt: skip
        found = sorted(WHEELS.glob(f"cloudpickle-{release}-*.whl"))
    assert found, f"pip download cloudpickle=={release} left no wheel in {WHEELS}"
    return found[0]


@pytest.mark.parametrize("release", RELEASES)
def test_traceback_names_the_users_file_line_and_source(release: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "usermod.py").write_text(MODULE)
    whl = wheel(release)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(whl)] * (whl is not None) + [str(ROOT)])}  # fmt: skip
    pkl = tmp_path / "call.pkl"
    made = subprocess.run(
        [sys.executable, "-c", PICKLE, str(src), str(pkl)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    if whl is not None:
        assert made.stdout.strip() == release  # the wheel, not the installed release
    moved = tmp_path / "moved"
    src.rename(moved)  # the node has no copy of the user's file
    ran = subprocess.run(
        [sys.executable, "-c", RUN, str(pkl)],
        env=env, capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    file = src / "usermod.py"
    assert f'File "{file}", line 6, in outer\n    return helper(x) + 1\n' in ran.stdout, ran.stdout
    assert f'File "{file}", line 2, in helper\n    raise ValueError(f"boom {{x}}")\n' in (
        ran.stdout
    ), ran.stdout
    assert "<dynamic-code>" not in ran.stdout


NESTED = textwrap.dedent(
    """\
    def outer(x):
        def inner(y):
            raise KeyError(y)

        return inner(x)


    # UNRELATED: the rest of the file stays on the laptop
    """
)


def test_a_call_carries_its_functions_lines_not_its_file(tmp_path: Path) -> None:
    """A map of 1,000 calls pickles the function 1,000 times: each carries the function's
    own lines (the nested one's come with the outer's), not the whole file."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "nestmod.py").write_text(NESTED + "# filler\n" * 5000)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pkl = tmp_path / "call.pkl"
    code = PICKLE.replace("usermod", "nestmod")
    made = subprocess.run(
        [sys.executable, "-c", code, str(src), str(pkl)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    data = pkl.read_bytes()
    assert b"UNRELATED" not in data and b"filler" not in data and len(data) < 4000
    src.rename(tmp_path / "moved")
    ran = subprocess.run(
        [sys.executable, "-c", RUN.replace("except ValueError", "except KeyError"), str(pkl)],
        env=env, capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    file = src / "nestmod.py"
    assert f'File "{file}", line 5, in outer\n    return inner(x)\n' in ran.stdout, ran.stdout
    assert f'File "{file}", line 3, in inner\n    raise KeyError(y)\n' in ran.stdout, ran.stdout
