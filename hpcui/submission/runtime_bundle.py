"""The runtime bundle: what the compute node imports, shipped once per version.

A zip of submitit, cloudpickle, typing_extensions and hpcui's own pure-Python packages,
put on PYTHONPATH by the batch script. The cluster needs only a Python interpreter of
the same minor version: no pip, no internet.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import os
import zipfile
from functools import lru_cache
from pathlib import Path

#: Modules/packages the compute side imports. hpcui.backends is listed on its own: in a
#: source checkout it lives in the repo's top-level backends/ folder, not under hpcui/.
BUNDLED = ("submitit", "cloudpickle", "typing_extensions", "hpcui", "hpcui.backends")
_SKIP_DIRS = {"__pycache__", "tui", "tests"}


def _sources(name: str) -> dict[str, Path]:
    """Archive name -> file for one module or package (the package's tree, by its import name)."""
    mod = importlib.import_module(name)
    origin = Path(mod.__file__ or "")
    if origin.name != "__init__.py":  # a single-file module
        return {origin.name: origin}
    root = origin.parent
    prefix = name.replace(".", "/")
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for fn in sorted(filenames):
            if fn.endswith((".py", ".toml")) and not fn.startswith("test_"):
                path = Path(dirpath) / fn
                out[f"{prefix}/{path.relative_to(root).as_posix()}"] = path
    return out


@lru_cache(maxsize=1)
def build_bundle() -> tuple[str, bytes]:
    """(content hash, zip bytes). Deterministic: same sources give the same hash."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        files: dict[str, Path] = {}
        for name in BUNDLED:  # an installed hpcui holds backends already: same names, once
            files.update(_sources(name))
        for arcname, path in sorted(files.items()):
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    data = buf.getvalue()
    return hashlib.sha256(data).hexdigest()[:16], data


@lru_cache(maxsize=1)
def bundle_sha256() -> str:
    """The bundle's whole SHA-256: what a job checks on the node before it imports it."""
    return hashlib.sha256(build_bundle()[1]).hexdigest()
