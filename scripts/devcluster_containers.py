"""Container runtimes of the first dev site (issue 32): enroot, pyxis, an apptainer stand-in.

enroot and pyxis are built from the unmodified sources in ../shared/vendor (cached, keyed
by the tarball's SHA-256; `../shared/vendor/README.md` says what building them here takes).
Images cannot be pulled (no registry is reachable), so two squashfs images are built from
Debian root filesystems: `pytorch.sqsh` (Debian 12, Python 3.11, torch from the dev
cluster's venv) and `py313.sqsh` (Debian 13, Python 3.13: the mismatch case). Each holds
`/etc/hpcui-image`, a file only the image has.

Apptainer/Singularity cannot be built here: `apptainer` and `singularity` are a STAND-IN
(tests/stand_ins/apptainer) that runs the same squashfs images through enroot.

A clone without ../shared/vendor gets one line saying the runtimes are skipped; the tests
that need them skip with that reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from devcluster_common import REPO, DevclusterError, run, say, write

VENDOR = REPO.parent / "shared" / "vendor"
OPT = Path("/opt/hpcui-devcluster")
ENROOT = OPT / "enroot"
PYXIS = OPT / "pyxis"
STANDIN = OPT / "standin-bin"
IMAGES = Path("/var/lib/hpcui-devcluster/images")
BUILD = Path("/var/lib/hpcui-devcluster/build")
BIN = Path("/usr/local/bin")  # on every user's PATH, login node and compute nodes alike
PLUGSTACK = Path("/etc/slurm/plugstack.conf")
#: what the dev cluster tells tests and users when the sources are absent
SKIPPED_FILE = Path("/run/hpcui-devcluster/containers-skipped")
ENROOT_CONF_D = OPT / "enroot/etc/enroot/enroot.conf.d/hpcui-devcluster.conf"
ENROOT_CONF_EXTRA = """# hpcui dev cluster (scripts/devcluster_containers.py)
# a per-user runtime folder the user may create (the default, /run/enroot, needs root)
ENROOT_RUNTIME_PATH        ${TMPDIR:-/tmp}/enroot-runtime-$(id -u)
# containers are node-local, as on most sites (NVIDIA's example config: /tmp): a folder per
# host name, so the login node and each compute node (own UTS namespace) keep their own
ENROOT_DATA_PATH           /var/tmp/hpcui-enroot-data/$(hostname)-$(id -u)
# the dev registry on loopback (127.0.0.1:5005) speaks plain HTTP: no certificate to trust
ENROOT_ALLOW_HTTP          yes
"""
IMAGE_RECIPE = "6"  # bump when the images' recipe below changes


def _tarball(project: str) -> Path | None:
    found = sorted(VENDOR.glob(f"{project}-*.tar.xz")) if VENDOR.is_dir() else []
    return found[-1] if found else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def available() -> str | None:
    """None when the sources are here; else the one line that says what is skipped."""
    missing = [p for p in ("enroot", "pyxis") if _tarball(p) is None]
    if missing:
        return (
            f"containers skipped: no {' or '.join(missing)} source in {VENDOR} "
            "(enroot, pyxis and the apptainer stand-in are not installed; container tests skip)"
        )
    return None


def _unpack(tarball: Path, into: Path) -> Path:
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    run(["tar", "-xJf", str(tarball), "-C", str(into)], timeout=120)
    (top,) = [p for p in into.iterdir() if p.is_dir()]
    return top


def ensure_enroot() -> bool:
    """enroot from ../shared/vendor, installed under /opt/hpcui-devcluster/enroot with its
    commands linked into /usr/local/bin. True when it was (re)installed."""
    tarball = _tarball("enroot")
    assert tarball is not None
    stamp = ENROOT / ".hpcui-source-sha256"
    want = _sha256(tarball)
    if stamp.exists() and stamp.read_text().strip() == want:
        _setcap(ENROOT / "bin")
        return write(ENROOT_CONF_D, ENROOT_CONF_EXTRA) | _link_enroot()
    t0 = time.monotonic()
    say(f"building enroot from {tarball.name} (first time only)")
    src = _unpack(tarball, BUILD / "enroot")
    # what ../shared/vendor/README.md found: no git submodules in the snapshot, so Debian's
    # makeself (same version) and the system headers stand where they would be, glibc not musl
    (src / "deps/makeself").mkdir(parents=True, exist_ok=True)
    shutil.copy("/usr/bin/makeself", src / "deps/makeself/makeself.sh")
    (src / "deps/linux-headers").mkdir(parents=True, exist_ok=True)
    (src / "deps/linux-headers/.stamp").touch()
    (src / "deps/dist/linux").mkdir(parents=True, exist_ok=True)
    (src / "deps/dist/linux/include").symlink_to("/usr/include")
    shutil.rmtree(ENROOT, ignore_errors=True)
    make = ["make", "-C", str(src), "FORCE_GLIBC=1", "LDLIBS=-l:libbsd.a -l:libbsd.so"]
    p = subprocess.run([*make, "install", f"prefix={ENROOT}"], capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    if p.returncode != 0:
        raise DevclusterError(f"building enroot failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    _setcap(ENROOT / "bin")
    stamp.write_text(want + "\n")
    shutil.rmtree(BUILD / "enroot", ignore_errors=True)
    say(f"enroot built and installed in {time.monotonic() - t0:.0f} s")
    write(ENROOT_CONF_D, ENROOT_CONF_EXTRA)
    _link_enroot()
    return True


ENROOT_DATA = Path("/var/tmp/hpcui-enroot-data")  # see ENROOT_CONF_EXTRA
#: what enroot's `make setcap` gives its helpers (NVIDIA's enroot+caps package): importing a
#: layered registry image converts its whiteouts with them
CAPS = {
    "enroot-mksquashovlfs": "cap_sys_admin+pe",
    "enroot-aufs2ovlfs": "cap_sys_admin,cap_mknod+pe",
}


def _setcap(bindir: Path) -> None:
    for exe, caps in CAPS.items():
        path = bindir / exe
        if "cap_sys_admin" not in run(["getcap", str(path)]).stdout:
            run(["setcap", caps, str(path)])


HOST = Path("/")


def _at(root: Path, path: Path) -> Path:
    """`path` of a site whose root filesystem is `root` (HOST: the first site's)."""
    return root / str(path).lstrip("/")


def _link(link: Path, target: str) -> bool:
    if link.is_symlink() and os.readlink(link) == target:
        return False
    link.unlink(missing_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return True


def _link_enroot(root: Path = HOST) -> bool:
    data = _at(root, ENROOT_DATA)
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o1777)
    changed = False
    for exe in sorted((ENROOT / "bin").iterdir()):
        changed = _link(_at(root, BIN / exe.name), str(exe)) or changed
    return changed


def ensure_pyxis() -> bool:
    """pyxis built against this Slurm's headers, loaded by slurmd/srun through
    plugstack.conf. True when it changed (the nodes must restart)."""
    tarball = _tarball("pyxis")
    assert tarball is not None
    plugin = PYXIS / "spank_pyxis.so"
    stamp = PYXIS / ".hpcui-source-sha256"
    version = run(["sh", "-c", "dpkg-query -W -f '${Version}' libslurm-dev"]).stdout.strip()
    want = f"{_sha256(tarball)} slurm {version}"
    changed = False
    if not (plugin.exists() and stamp.exists() and stamp.read_text().strip() == want):
        t0 = time.monotonic()
        say(f"building pyxis from {tarball.name} against Slurm {version} (first time only)")
        src = _unpack(tarball, BUILD / "pyxis")
        p = subprocess.run(["make", "-C", str(src)], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise DevclusterError(f"building pyxis failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        PYXIS.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / "spank_pyxis.so", plugin)
        os.chmod(plugin, 0o644)
        stamp.write_text(want + "\n")
        shutil.rmtree(BUILD / "pyxis", ignore_errors=True)
        say(f"pyxis built in {time.monotonic() - t0:.0f} s")
        changed = True
    return _write_plugstack(HOST) or changed


def _write_plugstack(root: Path) -> bool:
    """pyxis's defaults otherwise (container_scope=global: a named container stays on its
    node, in the node-local ENROOT_DATA_PATH, for the next job)."""
    runtime = Path("/run/hpcui-devcluster")  # pyxis makes its runtime_path, not the parent
    _at(root, runtime).mkdir(parents=True, exist_ok=True)
    conf = f"required {PYXIS / 'spank_pyxis.so'} runtime_path={runtime / 'pyxis'}\n"
    return write(_at(root, PLUGSTACK), conf)


def ensure_standin(root: Path = HOST) -> bool:
    """The STAND-IN `apptainer` and `singularity` commands (tests/stand_ins/apptainer)."""
    source = (REPO / "tests" / "stand_ins" / "apptainer").read_bytes()
    changed = write(_at(root, STANDIN / "apptainer"), source, mode=0o755)
    for name in ("apptainer", "singularity"):
        changed = _link(_at(root, BIN / name), str(STANDIN / "apptainer")) or changed
    return changed


def _debian_root(suite: str, packages: list[str], into: Path) -> None:
    shutil.rmtree(into, ignore_errors=True)
    p = subprocess.run(
        ["mmdebstrap", "--mode=root", "--variant=minbase", "--quiet",
         f"--include={','.join(packages)}", suite, str(into), "http://deb.debian.org/debian"],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if p.returncode != 0:
        raise DevclusterError(f"mmdebstrap {suite} failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")


def _as_image(root: Path, marker: str) -> None:
    """A root filesystem made an image: its marker in, apt's caches and device files out."""
    (root / "etc/hpcui-image").write_text(marker + "\n")
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(root / junk, ignore_errors=True)
    # no device files: an unprivileged `enroot create` cannot unpack them (the runtime
    # mounts /dev itself), as images imported from a registry have none
    for dev in (root / "dev").iterdir():
        if dev.is_dir() and not dev.is_symlink():
            shutil.rmtree(dev)
        else:
            dev.unlink()


def _squash(root: Path, image: Path, marker: str) -> None:
    _as_image(root, marker)
    tmp = image.with_suffix(".sqsh.new")
    tmp.unlink(missing_ok=True)
    run(["mksquashfs", str(root), str(tmp), "-noappend", "-comp", "lz4", "-quiet"], timeout=900)
    os.chmod(tmp, 0o644)
    os.replace(tmp, image)
    shutil.rmtree(root, ignore_errors=True)


_LEAN = shutil.ignore_patterns("__pycache__", "tests", "include", "*.pyc")


def ensure_images(venv: Path) -> None:
    """pytorch.sqsh and py313.sqsh in /var/lib/hpcui-devcluster/images (readable by all)."""
    site = next((venv / "lib").glob("python3.*/site-packages"))
    stamp = IMAGES / "images.stamp"
    want = f"{IMAGE_RECIPE} {sorted(p.name for p in site.iterdir() if p.name.startswith('torch-'))}"
    if stamp.exists() and stamp.read_text().strip() == want:
        return
    t0 = time.monotonic()
    say(f"building container images in {IMAGES} (first time only)")
    IMAGES.mkdir(parents=True, exist_ok=True)
    os.chmod(IMAGES, 0o755)
    with tempfile.TemporaryDirectory(dir=IMAGES.parent) as tmp:
        root = Path(tmp) / "pytorch"
        _debian_root("bookworm", ["python3"], root)
        dest = root / "usr/local/lib/python3.11/dist-packages"
        dest.mkdir(parents=True, exist_ok=True)
        # the dev venv's packages (torch, numpy, JupyterLab for `hpcui jupyter --container`),
        # installed for the image's own python3, as an NGC or LUMI image has them
        for entry in site.iterdir():
            if entry.name in ("pip", "setuptools", "_distutils_hack", "distutils-precedence.pth"):
                continue
            if entry.is_dir():  # less to unpack on every node: no C headers, tests, caches
                shutil.copytree(entry, dest / entry.name, symlinks=True, ignore=_LEAN)
            else:
                shutil.copy2(entry, dest / entry.name)
        # console scripts (jupyter, jupyter-lab, torchrun) for the image's own interpreter
        bindir = root / "usr/local/bin"
        bindir.mkdir(parents=True, exist_ok=True)
        shebang = b"#!" + str(venv / "bin" / "python").encode() + b"\n"
        for script in (venv / "bin").iterdir():
            if script.is_file() and not script.is_symlink():
                text = script.read_bytes()
                if text.startswith(shebang):
                    (bindir / script.name).write_bytes(
                        b"#!/usr/bin/python3\n" + text[len(shebang) :]
                    )
                    os.chmod(bindir / script.name, 0o755)
        _squash(
            root, IMAGES / "pytorch.sqsh", "hpcui dev image pytorch: Debian 12, Python 3.11, torch"
        )
        root = Path(tmp) / "py313"
        _debian_root("trixie", ["python3-minimal"], root)
        _squash(root, IMAGES / "py313.sqsh", "hpcui dev image py313: Debian 13, Python 3.13")
    stamp.write_text(want + "\n")
    say(f"container images built in {time.monotonic() - t0:.0f} s")


def up_static() -> bool:
    """Before the nodes start: runtimes and plugstack. True when the nodes must restart."""
    skipped = available()
    if skipped:
        say(skipped)
        write(SKIPPED_FILE, skipped + "\n")
        if PLUGSTACK.exists():  # an earlier `up` with the sources: no plugin to load now
            PLUGSTACK.unlink()
            return True
        return False
    SKIPPED_FILE.unlink(missing_ok=True)
    changed = ensure_enroot()
    changed = ensure_pyxis() or changed
    return ensure_standin() or changed


# --------------------------------------------------------------------------- the second site


def _copy_tree(src: Path, dest: Path) -> bool:
    """`src` copied to `dest` when its stamp differs. True when it was copied."""
    stamp = ".hpcui-source-sha256"
    want = (src / stamp).read_text() if (src / stamp).exists() else None
    if want is not None and (dest / stamp).exists() and (dest / stamp).read_text() == want:
        return False
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, symlinks=True)
    return True


def _same_images(root: Path) -> None:
    """The images at the same path inside `root`: hard links (one file system, no copy)."""
    dest = _at(root, IMAGES)
    dest.mkdir(parents=True, exist_ok=True)
    os.chmod(dest, 0o755)
    for image in sorted(IMAGES.glob("*.sqsh")):
        there = dest / image.name
        if there.exists() and os.path.samefile(image, there):
            continue
        there.unlink(missing_ok=True)
        try:
            os.link(image, there)
        except OSError:  # another file system: a copy (made once per image change)
            shutil.copy2(image, there)


def _pyxis_for(root: Path, include: Path) -> bool:
    """pyxis built by this machine's compiler against the Slurm headers of `root` (a plugin
    resolves Slurm's symbols when slurmd loads it). True when the plugin changed."""
    tarball = _tarball("pyxis")
    assert tarball is not None
    plugin = _at(root, PYXIS / "spank_pyxis.so")
    stamp = plugin.parent / ".hpcui-source-sha256"
    version = (include / "slurm" / "slurm_version.h").read_text()
    want = f"{_sha256(tarball)} slurm-headers {hashlib.sha256(version.encode()).hexdigest()[:16]}"
    if plugin.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return False
    t0 = time.monotonic()
    say(f"building pyxis for {root} against its Slurm headers (first time only)")
    src = _unpack(tarball, BUILD / "pyxis-site")
    with tempfile.TemporaryDirectory() as inc:
        (Path(inc) / "slurm").symlink_to(include / "slurm")  # only Slurm's, not its libc's
        # in the environment, not on make's command line: the Makefile appends to it
        p = subprocess.run(["make", "-C", str(src)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "CPPFLAGS": f"-I{inc}"})  # fmt: skip
    if p.returncode != 0:
        raise DevclusterError(f"building pyxis failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    plugin.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "spank_pyxis.so", plugin)
    os.chmod(plugin, 0o644)
    stamp.write_text(want + "\n")
    shutil.rmtree(BUILD / "pyxis-site", ignore_errors=True)
    say(f"pyxis built in {time.monotonic() - t0:.0f} s")
    return True


def up_in_root(root: Path) -> bool:
    """The runtimes, the stand-in and the images inside another site's root filesystem
    (dev24: pivot_root, so its users may create user namespaces). enroot's and the
    stand-in's files are copied to the same paths (their scripts name their prefix), the
    images hard-linked, pyxis built against that site's Slurm. True when its nodes must
    restart (plugstack.conf or the plugin changed)."""
    if available() is not None:
        plug = _at(root, PLUGSTACK)
        if plug.exists():
            plug.unlink()
            return True
        return False
    _copy_tree(ENROOT, _at(root, ENROOT))
    _setcap(_at(root, ENROOT / "bin"))
    write(_at(root, ENROOT_CONF_D), ENROOT_CONF_EXTRA)
    _link_enroot(root)
    ensure_standin(root)
    _same_images(root)
    changed = _pyxis_for(root, root / "usr/include")
    return _write_plugstack(root) or changed


# --------------------------------------------------------------------------- a registry


REGISTRY = "127.0.0.1:5005"
#: what tests import with `enroot import` (Debian 12's python3 and a marker, 77 MB)
REGISTRY_IMAGE = "hpcui/py311:1"
REGISTRY_DATA = Path("/var/lib/hpcui-devcluster/registry")
REGISTRY_RUN = Path("/run/hpcui-devcluster/registry")
REGISTRY_RECIPE = "1"  # bump when the pushed image's recipe changes


def _registry_pid() -> int | None:
    try:
        pid = int((REGISTRY_RUN / "pid").read_text().split()[0])
        return pid if os.readlink(f"/proc/{pid}/exe") == "/usr/bin/docker-registry" else None
    except (OSError, ValueError, IndexError):
        return None


def _registry_has(image: str) -> bool:
    import urllib.request

    repo, tag = image.rsplit(":", 1)
    req = urllib.request.Request(
        f"http://{REGISTRY}/v2/{repo}/manifests/{tag}", method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def ensure_registry() -> None:
    """Distribution's registry (Debian's docker-registry 2.8) on loopback, plain HTTP, no
    auth, holding one image pushed by skopeo (Docker schema 2: enroot asks for it), so
    `enroot import docker://127.0.0.1:5005#hpcui/py311:1` runs for real, start to end."""
    if _registry_pid() is None:
        REGISTRY_RUN.mkdir(parents=True, exist_ok=True)
        REGISTRY_DATA.mkdir(parents=True, exist_ok=True)
        conf = REGISTRY_RUN / "config.yml"
        write(conf, f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                    f"    rootdirectory: {REGISTRY_DATA}\nhttp:\n  addr: {REGISTRY}\n")  # fmt: skip
        with open(REGISTRY_RUN / "log", "ab") as log:
            p = subprocess.Popen(["/usr/bin/docker-registry", "serve", str(conf)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True, close_fds=True, cwd="/")  # fmt: skip
        (REGISTRY_RUN / "pid").write_text(f"{p.pid}\n")
        deadline = time.monotonic() + 30
        while not _registry_up() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _registry_up():
            raise DevclusterError(
                f"the dev registry did not answer on {REGISTRY} within 30 s; its log: "
                f"{REGISTRY_RUN / 'log'}"
            )
    stamp = REGISTRY_DATA / "pushed.stamp"
    if (
        stamp.exists()
        and stamp.read_text().strip() == REGISTRY_RECIPE
        and _registry_has(REGISTRY_IMAGE)
    ):
        return
    t0 = time.monotonic()
    say(f"pushing {REGISTRY_IMAGE} to the dev registry {REGISTRY} (first time only)")
    with tempfile.TemporaryDirectory(dir=IMAGES.parent) as tmp:
        root = Path(tmp) / "root"
        _debian_root("bookworm", ["python3"], root)
        _as_image(root, "hpcui dev image py311 from the registry: Debian 12, Python 3.11")
        layer = Path(tmp) / "layer.tar.gz"
        run(["tar", "-C", str(root), "--numeric-owner", "-czf", str(layer), "."], timeout=600)
        run(["skopeo", "copy", "--quiet", "--format", "v2s2", "--dest-tls-verify=false",
             f"tarball:{layer}", f"docker://{REGISTRY}/{REGISTRY_IMAGE}"], timeout=600)  # fmt: skip
    stamp.write_text(REGISTRY_RECIPE + "\n")
    say(f"registry image pushed in {time.monotonic() - t0:.0f} s")


def _registry_up() -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def stop_registry() -> bool:
    pid = _registry_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    return True


def up_images(venv: Path) -> None:
    if available() is None:
        ensure_images(venv)
        ensure_registry()


def status_line() -> str:
    """One line for `scripts/devcluster status` (installed files, no daemon)."""
    skipped = available()
    if skipped:
        return skipped
    parts = [
        f"enroot {'installed' if (ENROOT / 'bin/enroot').exists() else 'MISSING'}",
        f"pyxis {'in ' + str(PLUGSTACK) if PLUGSTACK.exists() else 'MISSING'}",
        "apptainer stand-in " + ("installed" if (STANDIN / "apptainer").exists() else "MISSING"),
        "images " + (" ".join(p.name for p in sorted(IMAGES.glob("*.sqsh"))) or "MISSING"),
        f"registry {REGISTRY} " + ("running" if _registry_pid() else "stopped"),
    ]
    return "containers    " + ", ".join(parts)
