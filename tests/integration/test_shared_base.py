"""A remote_base others can write: a group member must not be able to run code as you.

The dev cluster has a second user, hpcpeer, in a project group with hpcuser, and a shared
project folder /srv/hpcui-project (root:hpcproj 2775, as sites make them). hpcpeer acts on
the shared filesystem as itself (`runuser`), the way another member of your project
would. The runtime bundle's name is its content hash, so anyone can know it in advance:
before, hpcpeer could plant `runtime/<digest>.zip` first and hpcuser's jobs ran it.
"""

from __future__ import annotations

import io
import subprocess
import uuid
import zipfile
from pathlib import Path

import pytest

from hpcui.clusters.cluster import Cluster
from hpcui.config import load_config
from hpcui.errors import JobFailedError, JobLostError, UsageError
from hpcui.submission.runtime_bundle import build_bundle

pytestmark = pytest.mark.devcluster

PROJECT = Path("/srv/hpcui-project")


def add(a, b):
    return a + b


def _evil_bundle(marker: Path) -> bytes:
    """A runtime bundle whose runner records who ran it, then pretends all went well."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hpcui/__init__.py", "")
        zf.writestr("hpcui/node/__init__.py", "")
        zf.writestr(
            "hpcui/node/signed.py",
            f"import getpass\nopen({str(marker)!r}, 'w').write(getpass.getuser())\n",
        )
    return buf.getvalue()


def _as_peer(script: str, data: bytes | None = None) -> None:
    subprocess.run(["runuser", "-u", "hpcpeer", "--", "sh", "-c", script], input=data, check=True)


def _cluster(base: str) -> Cluster:
    return Cluster(load_config().cluster("dev").model_copy(update={"remote_base": base}))


@pytest.fixture
def shared_base(dev_env):
    tag = uuid.uuid4().hex[:8]
    base = PROJECT / f"t-{tag}"
    _as_peer(f"mkdir -m 2775 {base}")  # a project subfolder a group member made
    yield base
    subprocess.run(["rm", "-rf", str(base), f"/tmp/hpcui-t-{tag}-ran"], check=False)


@pytest.mark.timeout(180)
def test_a_bundle_planted_by_a_group_member_never_runs(shared_base):
    marker = Path(f"/tmp/hpcui-{shared_base.name}-ran")  # anyone may write there
    digest, _ = build_bundle()
    _as_peer(
        f"mkdir -m 2775 {shared_base}/runtime && cat > {shared_base}/runtime/{digest}.zip",
        _evil_bundle(marker),
    )
    with _cluster(str(shared_base)) as dev:
        info = dev.remote_info()
        # hpcuser's jobs go into a private folder of its own inside the shared one
        assert info.shared_base == str(shared_base) and info.base == f"{shared_base}/hpcuser"
        owner, mode = dev.run(["stat", "-c", "%U %a", info.base]).stdout.split()
        assert owner == "hpcuser" and mode.endswith("700"), (owner, mode)  # 2700: setgid kept
        assert dev.submit(add, 2, 3, time="5m").result(timeout=120) == 5
    assert not marker.exists(), f"the planted bundle ran as {marker.read_text()}"


@pytest.mark.timeout(60)
def test_a_private_folder_a_group_member_made_first_is_refused(shared_base):
    _as_peer(f"mkdir -m 2777 {shared_base}/hpcuser")
    with _cluster(str(shared_base)) as dev, pytest.raises(UsageError) as err:
        dev.submit(add, 2, 3, time="5m")
    message = str(err.value)
    assert f"{shared_base}/hpcuser" in message and "is not yours alone" in message
    assert not list(Path(shared_base, "hpcuser").iterdir())  # nothing of hpcuser's went in


@pytest.mark.timeout(180)
def test_a_bundle_changed_after_upload_is_refused_on_the_node(dev_env):
    """Whatever way a bundle gets swapped, the job checks its SHA-256 before importing it."""
    tag = uuid.uuid4().hex[:8]
    base = f"~/base-hash-{tag}"
    marker = Path(f"/tmp/hpcui-hash-{tag}-ran")
    with _cluster(base) as dev:
        try:
            assert dev.submit(add, 1, 1, time="5m").result(timeout=120) == 2  # bundle up
            digest, _ = build_bundle()
            path = f"{dev.remote_info().base}/runtime/{digest}.zip"
            dev.transport.write_file(path, _evil_bundle(marker), mode=0o644)
            job = dev.submit(add, 2, 3, time="5m")
            with pytest.raises((JobFailedError, JobLostError)) as err:
                job.result(timeout=120)
            assert "is not the file hpcui uploaded" in str(err.value)
            assert not marker.exists()
        finally:
            dev.run(f"rm -rf {base}")
