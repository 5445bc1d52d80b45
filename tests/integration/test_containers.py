"""Jobs inside container images on the dev cluster's real Slurm (issue 32).

enroot and pyxis are the real ones, built from ../shared/vendor by scripts/devcluster;
`apptainer` is the dev cluster's STAND-IN (tests/stand_ins/apptainer: Apptainer's command
line over enroot, since Apptainer cannot be built here). The images are squashfs files the
dev cluster builds: pytorch.sqsh (Debian 12, Python 3.11, torch) and py313.sqsh (Python
3.13); each holds /etc/hpcui-image, which this machine (the login node) does not have.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import JobFailedError, JobLostError, RemotePythonError, UsageError
from tests.conftest import ROOT
from tests.integration.clusters import site_cluster
from tests.integration.stalling_registry import stalling_registry

IMAGES = Path("/var/lib/hpcui-devcluster/images")
PYTORCH = str(IMAGES / "pytorch.sqsh")
PY313 = str(IMAGES / "py313.sqsh")
SKIPPED = Path("/run/hpcui-devcluster/containers-skipped")
RUNTIMES = ("enroot", "pyxis", "apptainer")
NODES24 = ("dev24n1", "dev24n2")
WAIT = 300
#: dev24's Slurm configuration without plugstack (scripts/devcluster_dev24.py NO_PYXIS_CONF)
NO_PYXIS_CONF = "/etc/slurm/slurm-nopyxis.conf"

pytestmark = [
    pytest.mark.devcluster,
    pytest.mark.skipif(
        SKIPPED.exists(),
        reason=SKIPPED.read_text().strip() if SKIPPED.exists() else "",
    ),
]


# -- functions that run inside the image ------------------------------------------------------


def inside(x: int) -> dict[str, Any]:
    import os
    import sys

    return {
        "image": open("/etc/hpcui-image").read().strip(),
        "python": sys.version_info[:2],
        "double": 2 * x,
        "mine": os.environ.get("HPCUI_TEST_MINE"),
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
        "procid": os.environ.get("SLURM_PROCID"),
    }


def boom() -> None:
    raise ValueError("raised inside the image")


def ddp_in_image(steps: int) -> dict[str, Any]:
    import os
    import socket

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    torch.manual_seed(rank)
    model = DDP(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
    out = {
        "rank": rank,
        "world": world,
        "host": socket.gethostname(),
        "master": os.environ["MASTER_ADDR"],
        "all_reduce": t.item(),
        "image": open("/etc/hpcui-image").read().strip(),
        "checksum": round(float(sum(p.detach().double().sum() for p in model.parameters())), 6),
    }
    hd.cleanup()
    return out


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dev(devcluster: Path) -> Iterator[Any]:
    with site_cluster(devcluster, "dev") as c:
        yield c


@pytest.fixture(scope="module")
def dev24(devcluster: Path) -> Iterator[Any]:
    """The second site (Slurm 24.11, trixie): the same runtimes in its own root filesystem."""
    with site_cluster(devcluster, "dev24") as c:
        yield c


#: each site's jobs, each runtime: what the result tests run
ON_SITES = [(site, runtime) for site in ("dev", "dev24") for runtime in RUNTIMES]


def test_the_login_node_has_no_image_marker() -> None:
    """What the jobs below read exists only inside the images."""
    assert not Path("/etc/hpcui-image").exists()
    assert Path(PYTORCH).is_file() and Path(PY313).is_file()


@pytest.mark.parametrize(("site", "runtime"), ON_SITES)
def test_a_result_computed_inside_the_image(site: str, runtime: str, request) -> None:
    dev = request.getfixturevalue(site)
    job = dev.submit(
        inside,
        21,
        container=PYTORCH,
        container_runtime=runtime,
        container_env={"HPCUI_TEST_MINE": "set for the container"},
        time="5m",
    )
    out = job.result(timeout=WAIT)
    assert out["image"].startswith("hpcui dev image pytorch"), out
    assert out["python"] == sys.version_info[:2] and out["double"] == 42
    assert out["mine"] == "set for the container"  # the runtime's own env passing
    assert out["slurm_job"] == job.job_id and out["procid"] == "0"  # the job's variables
    script = dev.control.batch_script(job.job_id)
    want = {
        "enroot": 'enroot-start.sh" hpcui-',
        "pyxis": f"--container-image={PYTORCH}",
        "apptainer": "apptainer exec -B ",
    }[runtime]
    assert want in script


def test_a_traceback_from_inside_names_the_users_file_and_line(dev) -> None:
    job = dev.submit(boom, container=PYTORCH, time="5m")
    with pytest.raises(JobFailedError) as err:
        job.result(timeout=WAIT)
    text = str(err.value)
    assert "raised inside the image" in text
    assert f'File "{__file__}", line' in text and "in boom" in text


@pytest.mark.parametrize(
    ("site", "runtime"), [*(("dev", r) for r in RUNTIMES), ("dev24", "enroot")]
)
def test_map_is_one_array_inside_the_image(site: str, runtime: str, request) -> None:
    dev = request.getfixturevalue(site)
    jobs = dev.map(inside, range(4), container=PYTORCH, container_runtime=runtime, time="5m")
    bases = {j.job_id.rsplit("_", 1)[0] for j in jobs}
    assert len(bases) == 1 and [j.job_id.rsplit("_", 1)[1] for j in jobs] == ["0", "1", "2", "3"]
    outs = [j.result(timeout=WAIT) for j in jobs]
    assert [o["double"] for o in outs] == [0, 2, 4, 6]
    assert all(o["image"].startswith("hpcui dev image pytorch") for o in outs)


@pytest.mark.xdist_group("distributed")  # all 8 GPUs: one at a time with the other DDP jobs
@pytest.mark.parametrize(("site", "runtime"), [*(("dev", r) for r in RUNTIMES), ("dev24", "pyxis")])
def test_ddp_8_ranks_on_2_nodes_inside_the_image(site: str, runtime: str, request) -> None:
    dev = request.getfixturevalue(site)
    job = dev.submit(
        ddp_in_image, 3, gpus=8, container=PYTORCH, container_runtime=runtime, time="5m",
        cpus_per_task=1, mem="4G",
    )  # fmt: skip
    outs = job.results(timeout=WAIT)
    assert sorted(o["rank"] for o in outs) == list(range(8))
    assert {o["world"] for o in outs} == {8}
    assert {o["host"] for o in outs} == ({"node1", "node2"} if site == "dev" else set(NODES24))
    assert len({o["master"] for o in outs}) == 1
    assert {o["all_reduce"] for o in outs} == {36.0}  # 1 + 2 + ... + 8
    assert len({o["checksum"] for o in outs}) == 1  # DDP kept the replicas equal
    assert all(o["image"].startswith("hpcui dev image pytorch") for o in outs)


def torchrun_in_image() -> dict[str, Any]:
    import os
    import socket

    import torch

    from hpcui import distributed as hd

    _, rank, world, _ = hd.setup()
    t = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(t)
    out = {
        "rank": rank, "world": world, "sum": t.item(), "host": socket.gethostname(),
        "node_rank": os.environ.get("GROUP_RANK"),
        "elastic": bool(os.environ.get("TORCHELASTIC_RUN_ID")),
        "image": open("/etc/hpcui-image").read().strip(),
    }  # fmt: skip
    hd.cleanup()
    return out


@pytest.mark.xdist_group("distributed")
def test_torchrun_runs_inside_the_image_on_each_node(dev) -> None:
    """launcher="torchrun": one torchrun agent per node, started in the image (enroot),
    whose workers are in the image too."""
    job = dev.submit(
        torchrun_in_image, gpus=4, nodes=2, launcher="torchrun", container=PYTORCH,
        time="5m", cpus_per_task=1, mem="4G",
    )  # fmt: skip
    results = job.results(timeout=WAIT)
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    assert [r["host"] for r in results] == ["node1", "node1", "node2", "node2"]
    assert [r["node_rank"] for r in results] == ["0", "0", "1", "1"]  # one agent per node
    assert {r["world"] for r in results} == {4} and {r["sum"] for r in results} == {10.0}
    assert all(r["elastic"] for r in results)
    assert all(r["image"].startswith("hpcui dev image pytorch") for r in results)
    assert "hpcui.node.torchrun agent" in dev.control.batch_script(job.job_id)


def _submitted_named(name: str) -> list[str]:
    """Jobs of any state Slurm knows by this (unique) name: a refused submit made none."""
    out = subprocess.run(
        ["squeue", "-h", "-u", "hpcuser", "-t", "all", "-n", name, "-o", "%i"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return out.stdout.split()


def test_an_image_with_another_python_is_refused_before_submit(dev) -> None:
    name = f"refused-{uuid.uuid4().hex[:8]}"
    with pytest.raises(RemotePythonError) as err:
        dev.submit(inside, 1, container=PY313, time="5m", name=name)
    mine = ".".join(map(str, sys.version_info[:2]))
    assert str(err.value).startswith(f"This image has Python 3.13; your client is {mine}:")
    assert f"Use an image with Python {mine}, or run hpcui from a Python 3.13 environment" in str(
        err.value
    )
    assert _submitted_named(name) == []  # nothing reached sbatch


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"container": str(IMAGES / "nope.sqsh")}, "does not exist on dev"),
        ({"container": "hpcui-no-such-container"}, "No enroot container named"),
        ({"container": "docker://127.0.0.1:9/none:1"}, "Importing docker://127.0.0.1:9/none:1"),
        ({"container": "/etc/shadow"}, "not a file you may read"),
    ],
)
def test_image_problems_are_said_before_submit(dev, kwargs, words) -> None:
    name = f"refused-{uuid.uuid4().hex[:8]}"
    with pytest.raises(UsageError, match=words):
        dev.submit(inside, 1, time="5m", name=name, **kwargs)
    assert _submitted_named(name) == []


def test_a_registry_imports_progress_is_said_while_it_runs(dev) -> None:
    """No registry is reachable here: a listener on loopback that holds each connection 2 s
    and closes it stands for a slow one. enroot's own lines reach the caller while the
    import runs (the follower reads the login node's import log each second), and the
    failure is said before any sbatch."""
    import time

    from hpcui.submission import containers as prep

    said: list[tuple[float, str]] = []
    name = f"refused-{uuid.uuid4().hex[:8]}"
    token = prep.import_progress.set(lambda line: said.append((time.monotonic(), line)))
    try:
        with stalling_registry() as port:
            ref = f"docker://127.0.0.1:{port}/slow/img:1"
            with pytest.raises(UsageError, match=f"Importing {ref}"):
                dev.submit(inside, 1, container=ref, time="5m", name=name)
            ended = time.monotonic()
    finally:
        prep.import_progress.reset(token)
    lines = [line for _, line in said]
    assert lines[0].startswith(f"importing {ref} into "), lines
    assert "[INFO] Querying registry for permission grant" in lines
    assert ended - said[0][0] > 1.0, said  # said while the import still ran, not after
    assert _submitted_named(name) == []


#: the dev cluster's registry on loopback (scripts/devcluster_containers.py: Distribution
#: 2.8, plain HTTP), holding Debian 12's python3 and a marker
REGISTRY_REF = "docker://127.0.0.1:5005#hpcui/py311:1"


@pytest.mark.parametrize("site", ["dev", "dev24"])
def test_a_registry_image_is_imported_once_then_reused(devcluster: Path, site: str) -> None:
    """`enroot import` for real, from a registry, with its progress said; a later process
    finds the imported file by name and imports nothing."""
    import time

    from hpcui.submission import containers as prep

    def submit_once(clean: bool) -> tuple[dict[str, Any], list[str]]:
        said: list[str] = []
        token = prep.import_progress.set(said.append)
        try:
            with site_cluster(devcluster, site) as c:  # a process of its own
                if clean:  # an earlier run's import: gone, so this one imports
                    base = c.remote_info().base
                    c.run(["sh", "-c", f"rm -f {base}/containers/127.0.0.1+5005*"]).check()
                out = c.submit(inside, 2, container=REGISTRY_REF, time="5m").result(timeout=WAIT)
        finally:
            prep.import_progress.reset(token)
        return out, said

    t0 = time.monotonic()
    out, said = submit_once(clean=True)
    took = time.monotonic() - t0
    again, said_again = submit_once(clean=False)
    assert out["image"] == "hpcui dev image py311 from the registry: Debian 12, Python 3.11"
    assert out["double"] == 4 and tuple(out["python"]) == sys.version_info[:2]
    assert said[0].startswith(f"importing {REGISTRY_REF} into "), said
    for line in ("[INFO] Fetching image manifest", "[INFO] Extracting image layers..."):
        assert line in said, said
    assert again["image"] == out["image"] and said_again == [], said_again  # reused by name
    print(f"\nimport + first job on {site}: {took:.1f} s")


def test_waiting_for_another_processs_import_is_said(dev) -> None:
    """Two hpcui processes importing one image: the second waits on the first's lock (for
    minutes, with a real registry) and says so instead of nothing."""
    import threading
    import time

    from hpcui.backends.containers import cache_key
    from hpcui.submission import containers as prep

    said: list[str] = []
    ref = "docker://127.0.0.1:9/held/img:1"
    lock = f"{dev.remote_info().base}/containers/.lock-{cache_key('enroot', ref)}"
    dev.run(["mkdir", "-p", lock.rsplit("/", 1)[0]]).check()
    holder = threading.Thread(target=dev.run, args=(["flock", lock, "sleep", "3"],))
    holder.start()  # the other process's import, as the lock shows it
    time.sleep(1)
    token = prep.import_progress.set(said.append)
    try:
        with pytest.raises(UsageError, match=f"Importing {ref}"):
            dev.submit(inside, 1, container=ref, time="5m")
    finally:
        prep.import_progress.reset(token)
        holder.join()
    assert said[0] == "waiting for another hpcui process that prepares this image", said
    assert said[1].startswith(f"importing {ref} into "), said


def test_a_runtime_the_site_lacks_is_said_before_submit(devcluster: Path) -> None:
    """dev24's login node as a user sees it without the runtimes: a PATH without
    /usr/local/bin (where the site installs enroot and apptainer: a module not loaded) and a
    Slurm configuration without SPANK plugins (a cluster without pyxis)."""
    with site_cluster(devcluster, "dev24", more_setup=["export PATH=/usr/bin:/bin"]) as c:
        for runtime in ("enroot", "apptainer"):
            with pytest.raises(UsageError, match=f"{runtime} is not on dev24's login node"):
                c.submit(inside, 1, container=PYTORCH, container_runtime=runtime, time="5m")
    no_pyxis = f"export SLURM_CONF={NO_PYXIS_CONF}"
    with site_cluster(devcluster, "dev24", more_setup=[no_pyxis]) as c:
        with pytest.raises(UsageError, match="pyxis is not installed"):
            c.submit(inside, 1, container=PYTORCH, container_runtime="pyxis", time="5m")


def test_a_container_that_cannot_start_fails_the_job_with_the_runtimes_words(dev) -> None:
    job = dev.submit(
        inside, 1, container=PYTORCH, container_runtime="apptainer",
        binds=["/nonexistent/hpcui"], time="5m",
    )  # fmt: skip
    with pytest.raises(JobLostError) as err:
        job.result(timeout=WAIT)
    assert job.state is JobState.FAILED
    assert "FATAL:   container creation failed: mount /nonexistent/hpcui" in str(err.value)


def _cli_env(devcluster: Path, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment: the dev cluster's config, a data folder of the test's own."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": str(devcluster),
        "HPCUI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(ROOT),
    }


def test_the_cli_runs_a_plain_script_inside_the_image(devcluster: Path, tmp_path: Path) -> None:
    (tmp_path / "where.py").write_text(
        textwrap.dedent(
            """
            import sys
            print("inside:", open("/etc/hpcui-image").read().strip(), sys.argv[1:], flush=True)
            """
        )
    )
    env = _cli_env(devcluster, tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "run", "--time", "5m", "--follow", "--container",
         PYTORCH, "--container-runtime", "pyxis", "where.py", "--epochs", "2"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=WAIT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "inside: hpcui dev image pytorch" in res.stdout and "['--epochs', '2']" in res.stdout


def test_the_cli_prints_a_registry_imports_progress_on_stderr(
    devcluster: Path, tmp_path: Path
) -> None:
    env = _cli_env(devcluster, tmp_path)
    with stalling_registry() as port:
        ref = f"docker://127.0.0.1:{port}/slow/img:1"
        res = subprocess.run(
            [sys.executable, "-m", "hpcui.cli", "submit", "--json", "--time", "5m",
             "--container", ref, "--args", "[1]", "tests.integration.test_containers:inside"],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT,
        )  # fmt: skip
    assert res.returncode != 0, res.stdout  # refused: no job id printed as submitted
    assert f"hpcui: importing {ref} into " in res.stderr, res.stderr
    assert "hpcui: [INFO] Querying registry for permission grant" in res.stderr
    assert f"Importing {ref} on dev failed" in res.stderr + res.stdout


def read_only_bind(folder: str) -> dict[str, Any]:
    """Inside the image: the bound folder's file is readable, and writing there fails."""
    import os

    seen = open(os.path.join(folder, "data.txt")).read()
    try:
        open(os.path.join(folder, "new.txt"), "w").write("x")
        wrote = "written"
    except OSError as exc:
        wrote = type(exc).__name__ + ": " + (exc.strerror or "")
    return {"seen": seen, "wrote": wrote}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_bind_written_src_ro_is_that_folder_read_only(dev, runtime: str) -> None:
    """`binds=["/path:ro"]` once mounted the folder at "/ro" (enroot, the stand-in) or
    failed the job at start (pyxis, exit 255): it is /path, read-only, in every runtime."""
    folder = f"{dev.transport.home()}/ro-{uuid.uuid4().hex[:8]}"  # on every node
    dev.run(["sh", "-c", f"mkdir -p {folder} && echo bound > {folder}/data.txt && chmod -R a+rwX {folder}"]).check()  # fmt: skip
    try:
        job = dev.submit(
            read_only_bind, folder, container=PYTORCH, container_runtime=runtime,
            binds=[f"{folder}:ro"], time="5m",
        )  # fmt: skip
        out = job.result(timeout=WAIT)
        assert out["seen"] == "bound\n", out  # the folder is at its own path
        assert out["wrote"].startswith("OSError: Read-only file system"), out
    finally:
        dev.run(["rm", "-rf", folder])


def test_a_killed_import_leaves_nothing_that_looks_cached(
    devcluster: Path, exclusive_cluster: None
) -> None:
    """Killing the prepare script's whole process tree while the image is written once
    left a partial .sqsh that every later submit took for the image ("Is it a squashfs
    image?"); the image is written under a temporary name and renamed when whole. Alone
    on the cluster: the kill reaches every import there, and the cache is shared."""
    import threading
    import time

    with site_cluster(devcluster, "dev") as c, site_cluster(devcluster, "dev") as watcher:
        base = c.remote_info().base
        cache = f"{base}/containers"
        watcher.run(["sh", "-c", f"rm -f {cache}/127.0.0.1+5005* {cache}/.part-127.0.0.1+5005*"])
        first: list[BaseException] = []

        def submit() -> None:
            try:
                c.submit(inside, 3, container=REGISTRY_REF, time="5m")
            except BaseException as exc:  # the kill ends it: said, not raised here
                first.append(exc)

        thread = threading.Thread(target=submit)
        thread.start()
        part = f"{cache}/.part-127.0.0.1+5005*"
        killed = False
        for _ in range(600):  # the image is being written: kill the whole tree now
            if watcher.run(["sh", "-c", f"ls {part} >/dev/null 2>&1"]).ok:
                watcher.run(["sh", "-c", "pkill -9 -f HPCUI_CONTAINER; pkill -9 -f 'enroot import'; "
                             "pkill -9 mksquashfs; true"])  # fmt: skip
                killed = True
                break
            time.sleep(0.02)
        thread.join(timeout=120)
        assert killed, "the import never wrote its image"
        assert first and isinstance(first[0], UsageError), first
        left = watcher.run(["sh", "-c", f"ls -a {cache}"]).stdout.split()
        assert not [n for n in left if n.startswith("127.0.0.1+5005") and n.endswith(".sqsh")], left
    with site_cluster(devcluster, "dev") as again:  # the next submit imports afresh
        out = again.submit(inside, 4, container=REGISTRY_REF, time="5m").result(timeout=WAIT)
    assert out["double"] == 8


def test_a_damaged_cached_image_is_named_with_how_to_remove_it(devcluster: Path) -> None:
    """A cached import that is not a squashfs image (an old version's killed import, a disk
    that filled): the refusal names the file and the command that removes it."""
    import re

    from hpcui.backends.containers import _safe

    ref = f"docker://127.0.0.1:5005#hpcui/damaged-{uuid.uuid4().hex[:8]}:1"  # its own
    with site_cluster(devcluster, "dev") as c:
        cache = f"{c.remote_info().base}/containers"
        damaged = f"{cache}/{_safe(ref)}.sqsh"
        c.run(["sh", "-c", f"mkdir -p {cache} && head -c 65536 /dev/urandom > {damaged}"]).check()
        try:
            with pytest.raises(UsageError) as err:
                c.submit(inside, 5, container=ref, time="5m")
            said = str(err.value)
            assert f"({damaged}) is damaged" in said, said
            assert re.search(rf"`hpcui -c dev exec -- rm {re.escape(damaged)}`", said), said
        finally:
            c.run(["rm", "-f", damaged])
