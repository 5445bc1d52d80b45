"""Container requests without a cluster: validation, each site's documented script form
(docs/containers.md quotes the documentation each follows), and the shell the scripts run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcui.backends import containers
from hpcui.backends.batch import BatchSpec
from hpcui.backends.containers import ContainerLaunch, check_image, image_kind, parse_prepare
from hpcui.backends.pbs.script import render_script as render_pbs
from hpcui.backends.slurm.script import render_script as render_slurm
from hpcui.errors import UsageError
from hpcui.profiles import load_profile
from hpcui.request.plan import resolve
from hpcui.request.resources import Resources
from tests.conftest import ROOT

IMG = "/images/pytorch.sqsh"
SITES = """
[clusters.aspire]
host = "aspire.example"
profile = "aspire2a-plus"
[clusters.lumi]
host = "lumi.example"
profile = "lumi-g"
[clusters.mahti]
host = "mahti.example"
profile = "mahti"
[clusters.jureca]
host = "jureca.example"
profile = "jureca-dc"
[clusters.mn5]
host = "mn5.example"
profile = "mn5-acc"
[clusters.dev]
host = "dev.example"
profile = "dev"
"""


def preview(tmp_path: Path, cluster: str, *args: str) -> str:
    """`hpcui script` for a site: renders offline, as a user previews before submitting."""
    (tmp_path / "c.toml").write_text(SITES)
    env = {**os.environ, "HPCUI_CONFIG": str(tmp_path / "c.toml"), "PYTHONPATH": str(ROOT)}
    env["HPCUI_DATA_DIR"] = str(tmp_path / "data")
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "script", "-c", cluster, "--container", IMG, *args],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout


# -- each site's documented form ---------------------------------------------------------


def test_aspire_runs_enroot_create_then_start_inside_pbs(tmp_path):
    script = preview(tmp_path, "aspire", "--gpus", "16", "--account", "p1")
    # NSCC: `enroot create --name NAME file.sqsh`, then `enroot start --mount ... NAME cmd`
    assert 'enroot create --name "$name" "$file"' in script
    assert 'exec enroot start "$@"' in script
    task = next(
        line for line in script.splitlines() if "enroot-start.sh" in line and "HPCUI_RANK" in line
    )
    assert re.search(
        r'bash "\$HPCUI_JOB_FOLDER/enroot-start.sh" hpcui-[0-9a-f]{16}-STAMP /images/pytorch.sqsh '
        r'--conf "\$HPCUI_JOB_FOLDER/enroot.conf" '
        r"-m HOME/\.hpcui:HOME/\.hpcui:none:x-create=auto,rbind hpcui-[0-9a-f]{16}-STAMP "
        r'python3 -u -m hpcui.node.pbs_env "\$HPCUI_JOB_FOLDER"',
        task,
    ), task
    # the helper and conf are written by the first node, after the sister nodes' branch
    assert script.index("--node ]; then") < script.index("<<'HPCUI_ENROOT_CONF'")
    assert script.index("<<'HPCUI_ENROOT_CONF'") < script.index("HPCUI_NODE_RANK=0 run_node")


def test_lumi_binds_its_file_systems_and_activates_the_images_conda(tmp_path):
    script = preview(tmp_path, "lumi", "--gpus", "8", "--account", "project_1")
    assert (
        "singularity exec --rocm -B HOME/.hpcui,/pfs,/scratch,/projappl,/project,/flash "
        "/images/pytorch.sqsh bash -c '$WITH_CONDA && exec \"$@\"' bash python3 -u -m "
        "hpcui.node.signed HOME/.hpcui/jobs/TOKEN"
    ) in script
    cpu = preview(tmp_path, "lumi", "--account", "project_1", "--partition", "small-g")
    assert "singularity exec -B HOME/.hpcui," in cpu  # no GPU asked: no --rocm


def test_csc_and_jsc_run_apptainer_exec_nv(tmp_path):
    mahti = preview(tmp_path, "mahti", "--gpus", "4", "--account", "project_1")
    assert (
        "apptainer exec --nv -B HOME/.hpcui,/scratch,/projappl /images/pytorch.sqsh python3 -u"
        in mahti
    )
    jureca = preview(tmp_path, "jureca", "--gpus", "4", "--account", "budget")
    assert "apptainer exec --nv -B HOME/.hpcui /images/pytorch.sqsh python3 -u" in jureca


def test_mn5_loads_singularity_first(tmp_path):
    script = preview(tmp_path, "mn5", "--gpus", "4", "--account", "bsc99", "--qos", "acc_debug")
    assert script.index("module load singularity") < script.index("singularity exec --nv")


def test_pyxis_is_srun_options(tmp_path):
    script = preview(
        tmp_path, "dev", "--container-runtime", "pyxis", "--binds", "/data:/data:ro",
        "--container-env", "HF_HOME=/data/hf",
    )  # fmt: skip
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert re.search(
        r"--container-image=/images/pytorch.sqsh --container-name=hpcui-[0-9a-f]{16}-STAMP "
        r"--container-mounts=HOME/.hpcui:HOME/.hpcui,/data:/data:ro --container-env=HF_HOME ",
        srun,
    ), srun
    assert srun.endswith("python3 -u -m hpcui.node.signed HOME/.hpcui/jobs/TOKEN")
    assert "export HF_HOME=/data/hf" in script


# -- what is refused, before any network ---------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "kwargs", "words"),
    [
        ("generic", {"container": IMG}, "names no container runtime"),
        ("local", {"container": IMG}, "The local cluster runs Python on this machine"),
        ("aspire2a-plus", {"container": IMG, "container_runtime": "pyxis", "account": "p"},
         "pyxis is a Slurm plugin"),
        ("dev", {"container": "/x/a.sif"}, "enroot cannot run a SIF file"),
        ("dev", {"container": "pytorch", "container_runtime": "apptainer"},
         "only runtime 'enroot' starts"),
        ("dev", {"container": "images/x.sqsh"}, "must be absolute"),
        ("dev", {"binds": ["/scratch"]}, "apply to a container"),
    ],
)  # fmt: skip
def test_requests_the_site_cannot_start_are_refused(profile, kwargs, words):
    with pytest.raises(UsageError, match=words):
        resolve(Resources.from_kwargs(**kwargs), load_profile(profile))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"container": "/img/a b.sqsh"},
        {"container": "/img/$(id).sqsh"},
        {"container": "/img/a'.sqsh"},
        {"container": IMG, "binds": ["relative/path"]},
        {"container": IMG, "binds": ["/a:/b:rx"]},
        {"container": IMG, "container_env": ["1BAD=x"]},
        {"container": IMG, "container_env": {"OK": "two\nlines"}},
    ],
)
def test_bad_values_never_reach_a_script(kwargs):
    with pytest.raises(UsageError, match="Invalid resource request"):
        Resources.from_kwargs(**kwargs)


def test_image_kinds():
    assert image_kind("docker://nvcr.io/nvidia/pytorch:24.12-py3") == "registry"
    assert image_kind("nvcr.io#nvidia/pytorch:24.12-py3") == "registry"
    assert image_kind("/p/x.sif") == image_kind("~/x.sqsh") == "file"
    assert image_kind("pytorch") == "name"
    assert check_image("nvcr.io#nvidia/pytorch:24.12-py3", "enroot") is None


# -- the shell the scripts run -----------------------------------------------------------


def _enroot_spec(**launch: object) -> BatchSpec:
    image = ContainerLaunch(
        "enroot", "hpcui-k-1", binds=("/h/.hpcui",), env=(("MINE", "a b"),),
        source="/img/x.sqsh", **launch,  # type: ignore[arg-type]
    )  # fmt: skip
    return BatchSpec(folder="/h/.hpcui/jobs/T", token="T", name="n", image=image)


def _heredoc(script: str, mark: str) -> str:
    return script.split(f"<<'{mark}'\n", 1)[1].split(f"\n{mark}\n", 1)[0] + "\n"


def test_the_enroot_conf_passes_the_jobs_variables_but_not_path(tmp_path):
    script = render_slurm(_enroot_spec())
    conf = tmp_path / "enroot.conf"
    conf.write_text(_heredoc(script, "HPCUI_ENROOT_CONF"))
    env = {"PATH": "/usr/bin:/bin", "SLURM_PROCID": "3", "MASTER_ADDR": "node1i",
           "ENROOT_DATA_PATH": "/x", "MULTI": "one\ntwo", "MINE": "a b"}  # fmt: skip
    out = subprocess.run(
        ["bash", "-c", f"source {conf} && environ"], env=env, capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()  # fmt: skip
    assert "SLURM_PROCID=3" in out and "MASTER_ADDR=node1i" in out and "MINE=a b" in out
    assert "MULTI=one two" in out  # one line per variable
    assert not any(line.startswith(("PATH=", "ENROOT_")) for line in out)


def test_scripts_parse_in_bash(tmp_path):
    for script in (render_slurm(_enroot_spec()), render_pbs(_enroot_spec())):
        path = tmp_path / "s.sh"
        path.write_text(script)
        subprocess.run(["bash", "-n", str(path)], check=True)
        helper = tmp_path / "h.sh"
        helper.write_text(_heredoc(script, "HPCUI_ENROOT_START"))
        subprocess.run(["bash", "-n", str(helper)], check=True)
    assert _heredoc(render_slurm(_enroot_spec()), "HPCUI_ENROOT_START") == containers.ENROOT_START


def test_prepare_output_is_read_from_its_last_mark():
    text = "noise\nHPCUI_CONTAINER status=ok image=hpcui-a-1 python=3.11.2 file=/i/x.sqsh\n"
    assert parse_prepare(text) == {
        "status": "ok", "image": "hpcui-a-1", "python": "3.11.2", "file": "/i/x.sqsh",
    }  # fmt: skip
    assert parse_prepare("nothing here") == {}


def test_an_unknown_runtime_in_a_profile_is_refused_with_the_choices():
    from hpcui.profiles import ContainerSite, Profile

    with pytest.raises(ValueError, match=r"apptainer.*singularity.*enroot.*pyxis"):
        Profile(name="p", container={"runtime": "docker"})
    assert ContainerSite(runtime="enroot").python == "python3"


def test_a_registry_import_writes_its_progress_to_the_log_the_client_reads(tmp_path):
    script = containers.prepare_script(
        "enroot", "docker://nvcr.io#nvidia/pytorch:24.12-py3", python="python3",
        cache="/c", init=None, progress_log="/c/.import-ab12 x.log",
    )  # fmt: skip
    assert "plog='/c/.import-ab12 x.log'" in script  # quoted: a path never runs as code
    # under a temporary name, renamed when whole; `--` before the user's reference
    assert (
        '{ enroot import -o "$part" -- "$img" >>"$plog" 2>&1 && mv -f "$part" "$file"; }' in script
    )
    path = tmp_path / "p.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    # a file image needs no log
    assert "plog" not in containers.prepare_script(
        "enroot", "/i/x.sqsh", python="python3", cache="/c", init=None
    )


def test_import_progress_is_said_line_by_line_while_the_import_runs(tmp_path):
    """The client's follower over a real file written by a real process: complete lines
    once, a bar redrawn with \\r as its state at each read, the rest after it ended."""
    import threading
    import time

    from hpcui.submission import containers as prep
    from hpcui.transport.local import LocalTransport

    log = tmp_path / ".import-x.log"
    writer = (
        "import sys, time\n"
        "f = open(sys.argv[1], 'w', buffering=1)\n"
        "f.write('importing docker://x into /c/x.sqsh\\n'); time.sleep(0.5)\n"
        "f.write('[INFO] Querying registry\\n'); f.write('layer 10%'); f.flush(); time.sleep(0.5)\n"
        "f.write('\\rlayer 60%'); f.flush(); time.sleep(0.5)\n"
        "f.write('\\rlayer 100%\\n[INFO] Creating squashfs\\n')\n"
    )
    said: list[tuple[float, str]] = []
    t0 = time.monotonic()
    with prep.following(
        LocalTransport(), str(log), lambda line: said.append((time.monotonic() - t0, line)),
        every=0.1,
    ):  # fmt: skip
        proc = threading.Thread(
            target=subprocess.run, args=([sys.executable, "-c", writer, str(log)],)
        )
        proc.start()
        proc.join()
        first_seen = said[0][0] if said else None
    lines = [line for _, line in said]
    assert lines[0] == "importing docker://x into /c/x.sqsh"
    assert first_seen is not None and first_seen < 1.0  # said while the writer still ran
    assert "layer 10%" in lines and "layer 60%" in lines  # the bar's states as it went
    assert lines[-2:] == ["layer 100%", "[INFO] Creating squashfs"]
    assert len(lines) == len(set(lines))  # nothing said twice


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_failing_progress_listener_ends_the_following_only(tmp_path):
    """The prepare goes on (its answer matters, the progress does not)."""
    from hpcui.submission import containers as prep
    from hpcui.transport.local import LocalTransport

    log = tmp_path / ".import-y.log"
    log.write_text("importing docker://x into /c/x.sqsh\n")
    calls: list[str] = []

    def broken(line: str) -> None:
        calls.append(line)
        raise RuntimeError("the app is gone")

    following = prep.following(LocalTransport(), str(log), broken, every=0.05)
    with following:
        following.thread.join(timeout=5)  # it ended by itself, at the first line
        assert not following.thread.is_alive()
    assert calls == ["importing docker://x into /c/x.sqsh"]


def test_the_enroot_helpers_are_never_seen_half_written(tmp_path):
    """Every element of an array writes enroot-start.sh and enroot.conf into the one job
    folder while the others' tasks start from them: a reader never finds either empty or
    cut (a `cat >` truncated the helper under a starting task, which then ran nothing)."""
    script = render_slurm(_enroot_spec())
    lines = script.splitlines()
    first = next(i for i, line in enumerate(lines) if "<<'HPCUI_ENROOT_START'" in line)
    last = lines.index("HPCUI_ENROOT_CONF") + 1
    while lines[last].startswith("mv -f"):  # the writes' own last lines
        last += 1
    folder = tmp_path / "job"
    folder.mkdir()
    writer = tmp_path / "write.sh"
    writer.write_text("\n".join(lines[first:last]).replace("/h/.hpcui/jobs/T", str(folder)) + "\n")
    helper, conf = folder / "enroot-start.sh", folder / "enroot.conf"
    subprocess.run(["bash", str(writer)], check=True)
    want = (helper.read_text(), conf.read_text())
    assert want[0] == containers.ENROOT_START and want[1].startswith("environ() {")
    loop = f"for i in $(seq 40); do bash {writer}; done"  # bounded: 4 writers x 40 writes
    writers = [subprocess.Popen(["bash", "-c", loop]) for _ in range(4)]
    seen = set()
    while any(w.poll() is None for w in writers):
        seen.add((helper.read_text(), conf.read_text()))
    assert all(w.wait() == 0 for w in writers)
    assert seen <= {want}, [s for s in seen if s != want][:1]
    assert not [
        p.name for p in folder.iterdir() if p.name not in ("enroot-start.sh", "enroot.conf")
    ]


def test_an_image_that_looks_like_an_option_is_refused():
    for runtime in containers.RUNTIMES:
        why = containers.check_image("--help#x", runtime)
        assert why is not None and "option" in why
        assert containers.check_image("-x.sqsh", runtime) is not None


def test_a_read_only_bind_without_destination_means_the_same_path():
    def launch(runtime):
        return containers.ContainerLaunch(runtime=runtime, image="/i/x.sqsh", binds=("/data:ro",))

    enroot = containers.wrap(launch("enroot"), "-c pass")
    assert "-m /data:/data:none:x-create=auto,rbind,ro" in enroot
    assert containers.srun_options(launch("pyxis")) == (
        "--container-image=/i/x.sqsh --container-mounts=/data:/data:ro "
    )
    assert "-B /data:/data:ro " in containers.wrap(launch("apptainer"), "-c pass")
    assert containers.parse_bind("/data:/in:ro") == "/data:/in:ro"


def test_the_cli_refuses_an_image_that_looks_like_an_option(tmp_path):
    (tmp_path / "c.toml").write_text(SITES)
    env = {**os.environ, "HPCUI_CONFIG": str(tmp_path / "c.toml"), "PYTHONPATH": str(ROOT)}
    env["HPCUI_DATA_DIR"] = str(tmp_path / "data")
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", "script", "-c", "dev", "--container=--help#x",
         "--container-runtime", "enroot"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2 and "read as an option" in res.stderr, res.stderr
