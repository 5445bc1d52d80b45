"""The environments on a cluster (hpcui.submission.env_store): the listing command run by a
real shell over real folders here (LocalTransport), what this machine's registry adds
(used here, in use by), and removal refused while a job runs one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import UsageError
from hpcui.profiles import load_profile
from hpcui.store.registry import JobRecord, Registry
from hpcui.store.remote import RemoteInfo
from hpcui.submission.env_store import EnvStore, key_of
from hpcui.transport.local import LocalTransport

A, B = "0123456789abcdef", "fedcba9876543210"


def _env(envs: Path, key: str, reqs: str, files: int) -> None:
    d = envs / key
    (d / "bin").mkdir(parents=True)
    for i in range(files):
        (d / f"f{i}").write_bytes(b"x" * 5000)
    (d / ".hpcui-ready").touch()
    (envs / f"{key}.requirements.txt").write_text(reqs)


@pytest.fixture
def store(tmp_path: Path) -> tuple[EnvStore, Registry, Path]:
    base = tmp_path / "base"
    envs = base / "envs"
    _env(envs, A, "humanize==4.15.0\n", 3)
    _env(envs, B, "pydantic==2.14.4\nrich\n", 1)
    (envs / "half.part-12").mkdir()  # a build under way: not listed
    (envs / "cut").mkdir()  # renamed but never marked: not listed
    info = RemoteInfo(home=str(tmp_path), base=str(base), python_version=(3, 11, 2), envs={A, B})
    reg = Registry(tmp_path / "r.sqlite")
    s = EnvStore(name="c", transport=LocalTransport(), registry=reg, info=lambda: info,
                 profile=load_profile("dev"), python="python3", setup=[])  # fmt: skip
    return s, reg, envs


def test_ready_environments_are_listed_with_size_inodes_and_requirements(store):
    s, reg, envs = store
    reg.add([JobRecord(cluster="c", token="t1", job_id="7", folder="/f", meta={"env": A},
                       state=JobState.RUNNING)])  # fmt: skip
    got = {e.key: e for e in s.list()}
    assert set(got) == {A, B}
    a = got[A]
    assert a.requirements == ["humanize==4.15.0"] and a.python == f"{envs}/{A}/bin/python"
    assert a.inodes == 6 and a.size_bytes >= 15_000  # the folder, bin, 3 files, the mark
    assert a.in_use_by == ["7"] and a.used_at is not None and a.built_at is not None
    assert got[B].requirements == ["pydantic==2.14.4", "rich"] and got[B].in_use_by == []
    assert s.show(B[:6]).key == B
    with pytest.raises(UsageError, match="No environment 'nope'"):
        s.show("nope")


def test_one_a_running_job_uses_is_not_removed_the_other_is(store):
    s, reg, envs = store
    reg.add([JobRecord(cluster="c", token="t1", job_id="7", folder="/f", meta={"env": A},
                       state=JobState.RUNNING)])  # fmt: skip
    with pytest.raises(UsageError, match=f"Not removed: {A} \\(7\\) still run it"):
        s.remove([A])
    assert s.remove([B]) == [B]
    assert not (envs / B).exists() and not (envs / f"{B}.requirements.txt").exists()
    assert (envs / A).exists()


def test_a_jobs_python_names_its_environment():
    assert key_of(f"/home/u/.hpcui/envs/{A}/bin/python") == A
    assert key_of("/usr/bin/python3") is None and key_of("/envs/short/bin/python") is None


def test_clean_takes_only_what_no_job_used_for_that_long(store):
    import os
    import time
    from datetime import timedelta

    s, reg, envs = store
    old = time.time() - 40 * 86400
    for key in (A, B):
        os.utime(envs / key / ".hpcui-ready", (old, old))
    (envs / A / ".hpcui-used").touch()  # a job started with A today, from any machine
    assert [e.key for e in s.clean(timedelta(days=30), dry_run=True)] == [B]
    assert (envs / B).exists()  # a dry run removes nothing
    reg.add([JobRecord(cluster="c", token="t2", job_id="8", folder="/f", meta={"env": B},
                       state=JobState.PENDING, submitted_at=old)])  # fmt: skip
    assert s.clean(timedelta(days=30)) == []  # B waits to run in a job: kept
    reg.update_states("c", {"8": (JobState.COMPLETED, "COMPLETED")})
    assert [e.key for e in s.clean(timedelta(days=30))] == [B]
    assert not (envs / B).exists() and (envs / A).exists()
