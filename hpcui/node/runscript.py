"""Compute side of `hpcui run SCRIPT` and the app's script submit: run a script whose
source travelled in the pickle.

The cluster never sees the laptop's files, so the script's text is the job's argument.
Imported on the compute node from the runtime bundle (which leaves out `hpcui/tui`):
standard library only.
"""

from __future__ import annotations

import linecache
import subprocess
import sys
import types


def run_script(source: str, filename: str, argv: list[str] | None = None) -> int:
    """Execute `source` as `__main__` with `sys.argv = [filename, *argv]`; returns 0.

    Python files run in-process (tracebacks show the script's lines via linecache);
    anything else runs with bash. `sys.exit(0)` is success; any other exit status
    raises, so the job ends FAILED with a traceback like every other failure.
    """
    argv = list(argv or [])
    if not filename.endswith(".py"):
        done = subprocess.run(["bash", "-c", source, filename, *argv], check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{filename} exited with status {done.returncode}")
        return 0
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType("__main__")
    module.__file__ = filename
    saved_main, saved_argv = sys.modules.get("__main__"), sys.argv
    sys.modules["__main__"] = module
    sys.argv = [filename, *argv]
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RuntimeError(f"{filename} exited with status {exc.code!r}") from None
    finally:
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    return 0
