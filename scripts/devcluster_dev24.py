"""The dev cluster's second site, `dev24`: Debian trixie's Slurm 24.11 and Lmod 8.7 in its own root.

A real site runs newer software than Debian 12's Slurm 22.05 and Lmod 8.6, and its system
Python (trixie: 3.13) differs from the laptop's (3.11). This site is a Debian trixie root
filesystem (mmdebstrap, cached under /var/lib/hpcui-devcluster/dev24) in which run munged,
MariaDB, slurmdbd, slurmctld, two slurmd nodes and an OpenSSH server, each a real daemon
started by `scripts/devcluster up` with `pivot_root` inside a private mount namespace (its own
/proc, the host's /dev and /sys bound in; nothing is left mounted on the host, so the root
filesystem can always be deleted safely). It shares only the loopback network with the
first site, on ports of its own:

  sshd 127.0.0.1:2225 (host "dev24-login")   slurmctld :6917   slurmdbd 127.0.0.1:6919
  nodes dev24n1, dev24n2 on 127.0.2.11/12, ports 6931/6932   MariaDB: unix socket only

Python 3.11 is provided as sites do: a `python/3.11` modulefile over an interpreter under
/opt/python/3.11 (Debian 12's CPython 3.11, copied from this machine with the one library
trixie lacks), and `pytorch/2.13.0` over a venv made from it. Lmod's tree has the first
site's modules plus an alias, a version alias, hidden versions (by hide_version, loaded
through an alias, and by a leading dot) in /opt/site/modulefiles (.modulerc.lua).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import devcluster_containers as containers
from devcluster_common import (
    DAEMON_ENV,
    JUPYTERLAB,
    REPO,
    TENSORBOARD,
    DevclusterError,
    port_open,
    same_file,
    say,
    ssh_banner,
    tail,
    wait_for,
    write,
)

NAME = "dev24"
SUITE = "trixie"
MIRROR = "http://deb.debian.org/debian"
CACHE = Path("/var/lib/hpcui-devcluster") / NAME
ROOT = CACHE / "rootfs"
STAMP = CACHE / "rootfs.stamp"
STATE = REPO / ".devcluster" / NAME  # pid files of this clone (logs live inside the site)
LOGDIR_IN = Path("/var/log/hpcui")  # inside the site

PACKAGES = [
    # Slurm 24.11 with accounting, munge, MariaDB
    "slurm-wlm", "slurmctld", "slurmd", "slurmdbd", "slurm-client",
    "slurm-wlm-mysql-plugin", "slurm-wlm-basic-plugins", "munge",
    "mariadb-server", "mariadb-client",
    # the login node: OpenSSH, Lmod 8.7, the system python3 (3.13), tools jobs use
    "openssh-server", "openssh-sftp-server", "lmod", "python3",
    "procps", "iproute2", "util-linux", "hostname", "passwd", "tar", "gzip", "coreutils",
    # enroot's runtime packages (../shared/vendor/README.md) and Slurm's headers for pyxis
    "squashfs-tools", "jq", "parallel", "zstd", "pigz", "fuse-overlayfs", "squashfuse",
    "bsdextrautils", "curl", "file",  # column (enroot list), registry imports
    "libslurm-dev",
    # libraries the /opt/python/3.11 interpreter's extension modules link against
    "libffi8", "libsqlite3-0", "libexpat1", "libbz2-1.0", "liblzma5", "zlib1g", "libssl3t64",
    "libncursesw6", "libreadline8t64", "libuuid1", "libgdbm6t64", "libgdbm-compat4t64",
    "libdb5.3t64",
]  # fmt: skip

USER, ACCOUNT = "hpcuser", "hpcacct"
LOGIN = "dev24-login"
SSHD_PORT = 2225
SLURMCTLD_PORT, SLURMDBD_PORT = 6917, 6919
NODES = ["dev24n1", "dev24n2"]
INTERCONNECT_SUFFIX = "i"  # as on the first site: profile "dev" asks for it
MODULEFILES = Path("/opt/site/modulefiles")
NO_PYXIS_CONF = "/etc/slurm/slurm-nopyxis.conf"
PY311 = Path("/opt/python/3.11")
TORCH_VERSION = "2.13.0"
TORCH_VENV = Path("/opt/sw/pytorch") / TORCH_VERSION
WHEELS_IN = Path("/var/cache/hpcui-wheels")
MUNGE_KEY_HOST = REPO / ".devcluster" / "munge" / f"{NAME}.key"

COMPONENTS = ["munged", "mariadb", "slurmdbd", "slurmctld", *(f"slurmd-{n}" for n in NODES), "sshd"]
EXE = {
    "munged": "/usr/sbin/munged",
    "mariadb": "/usr/sbin/mariadbd",
    "slurmdbd": "/usr/sbin/slurmdbd",
    "slurmctld": "/usr/sbin/slurmctld",
    **{f"slurmd-{n}": "/usr/sbin/slurmd" for n in NODES},
    "sshd": "/usr/sbin/sshd",
}


def node_addr(node: str) -> str:
    return f"127.0.2.{10 + int(node.removeprefix('dev24n'))}"


def interconnect_addr(node: str) -> str:
    return f"127.0.3.{10 + int(node.removeprefix('dev24n'))}"


def node_port(node: str) -> int:
    return 6930 + int(node.removeprefix("dev24n"))


def node_range() -> str:
    return f"dev24n[1-{len(NODES)}]"


def inside(path: Path | str) -> Path:
    """A path of the site, as this machine sees it."""
    return ROOT / str(path).lstrip("/")


# --------------------------------------------------------------------------- commands


def chroot_run(
    argv: list[str], check: bool = True, timeout: float = 60, input: str | None = None
) -> subprocess.CompletedProcess:
    """A short command inside the site (client commands need no /proc: plain chroot)."""
    p = subprocess.run(
        ["chroot", str(ROOT), *argv],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**DAEMON_ENV, "HOME": "/root"},
    )
    if check and p.returncode != 0:
        raise DevclusterError(
            f"{NAME}: command failed (rc={p.returncode}): {' '.join(argv)}\n{p.stdout}{p.stderr}"
        )
    return p


def spawn_argv(argv: list[str], hostname: str | None = None, tmpfs_tmp: bool = False) -> list[str]:
    """Run `argv` with the site as its root, in a private mount namespace (and UTS namespace
    when `hostname` is given) that holds the site's /proc, /dev and /sys mounts.

    The root is changed with pivot_root, not chroot: the kernel refuses an unprivileged user
    namespace to a process whose root is not its mount namespace's root (user_namespaces(7),
    EPERM), and enroot, pyxis and the apptainer stand-in start containers in one."""
    r = shlex.quote(str(ROOT))
    steps = [
        f"mkdir -p {r}/.oldroot",
        f"mount --bind {r} {r}",  # pivot_root wants the new root to be a mount point
        f"mount -t proc proc {r}/proc",
        f"mount --rbind /dev {r}/dev",
        f"mount --rbind /sys {r}/sys",
    ]
    if tmpfs_tmp:
        steps.append(f"mount -t tmpfs -o mode=1777,size=1g hpcui-{hostname}-tmp {r}/tmp")
    if hostname:
        steps.append(f"hostname {shlex.quote(hostname)}")
    steps += [f"cd {r}", "pivot_root . .oldroot"]
    # from here on the site's own programs run; the host's tree is detached from the namespace
    inner = shlex.quote('umount -l /.oldroot && exec "$@"')
    script = " && ".join(steps) + f' && exec /usr/bin/sh -c {inner} sh "$@"'
    ns = ["--uts"] if hostname else []
    return ["unshare", "--mount", "--propagation", "private", *ns, "--", "/bin/sh", "-c", script,
            "sh", *argv]  # fmt: skip


# --------------------------------------------------------------------------- processes


def _pidfile(name: str) -> Path:
    return STATE / "run" / f"{name}.pid"


_REAL: dict[str, str] = {}


def real_exe(name: str) -> str:
    """The program of component `name` as this machine sees it: links resolved inside the
    site (Debian installs /usr/sbin/slurmctld as a link to /etc/alternatives/...)."""
    if name in _REAL:
        return _REAL[name]
    p = chroot_run(["readlink", "-f", EXE[name]], check=False) if ROOT.is_dir() else None
    if p is None or p.returncode != 0 or not p.stdout.strip():
        return str(inside(EXE[name]))  # no site yet: nothing of it runs; not cached
    _REAL[name] = str(inside(p.stdout.strip()))
    return _REAL[name]


def _ours(pid: int, name: str) -> bool:
    """A live process of component `name` of this site (its root is the site's root)."""
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
        if st[st.rindex(")") + 2] in "ZX":
            return False
        return same_file(f"/proc/{pid}/root", ROOT) and same_file(
            f"/proc/{pid}/exe", real_exe(name)
        )
    except (OSError, ValueError):
        return False


def _find(name: str) -> int | None:
    """The main process of `name` (not a forked child), found in /proc."""
    exe = real_exe(name)
    want = f"\0{name[7:]}\0".encode() if name.startswith("slurmd-") else None
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or not _ours(int(d.name), name):
            continue
        try:
            if want and want not in (d / "cmdline").read_bytes():
                continue
            st = (d / "stat").read_text()
            ppid = st[st.rindex(")") + 2 :].split()[1]
            if same_file(f"/proc/{ppid}/exe", exe):
                continue  # an sshd session or a forked slurmd helper
        except OSError:
            pass
        return int(d.name)
    return None


def running_pid(name: str) -> int | None:
    try:
        pid = int(_pidfile(name).read_text().split()[0])
        if _ours(pid, name):
            return pid
    except (OSError, ValueError, IndexError):
        pass
    pid = _find(name)  # started by another clone, or its pid file is lost
    if pid is not None and _pidfile(name).parent.is_dir():
        _pidfile(name).write_text(f"{pid}\n")
    return pid


def spawn(name: str, argv: list[str], **kw) -> int:
    log = log_path(f"{name}.out")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as lf:
        lf.write(f"\n==== devcluster: starting {name} ({time.ctime()})\n".encode())
        lf.flush()
        p = subprocess.Popen(
            spawn_argv(argv, **kw),
            stdin=subprocess.DEVNULL,
            stdout=lf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=DAEMON_ENV,
            cwd="/",
        )
    _pidfile(name).write_text(f"{p.pid}\n")
    return p.pid


def stop(name: str, timeout: float = 15.0) -> bool:
    pid = running_pid(name)
    _pidfile(name).unlink(missing_ok=True)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while _ours(pid, name) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _ours(pid, name):
        say(f"{NAME} {name} (pid {pid}) ignored SIGTERM: SIGKILL")
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.3)
    return True


def log_path(name: str) -> Path:
    return inside(LOGDIR_IN) / name


def check_port_free(port: int, name: str, host: str = "127.0.0.1") -> None:
    if port_open(port, host):
        raise DevclusterError(
            f"cannot start {NAME} {name}: {host}:{port} is already in use by a process this "
            "dev cluster did not start (see `ss -ltnp`); stop it and run `scripts/devcluster up`."
        )


# --------------------------------------------------------------------------- the root filesystem


def _stamp() -> str:
    return hashlib.sha256(f"{SUITE} {MIRROR} {' '.join(PACKAGES)}".encode()).hexdigest()[:16]


def ensure_rootfs() -> None:
    """Debian trixie with the site's packages, built once (about 30 s) and kept."""
    if STAMP.exists() and STAMP.read_text().strip() == _stamp() and (ROOT / "usr/sbin").is_dir():
        return
    for name in reversed(COMPONENTS):
        stop(name)
    if any(f" {ROOT}/" in line or f" {ROOT} " in line for line in open("/proc/mounts")):
        raise DevclusterError(f"something is mounted under {ROOT}: unmount it first")
    if not shutil.which("mmdebstrap"):
        raise DevclusterError("mmdebstrap is missing: run scripts/install-deps first")
    say(f"{NAME}: building a Debian {SUITE} root filesystem in {ROOT} (first time only)")
    t0 = time.monotonic()
    tmp = CACHE / "rootfs.new"
    shutil.rmtree(tmp, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(
        ["mmdebstrap", "--mode=root", "--variant=apt", "--quiet",
         f"--include={','.join(PACKAGES)}", SUITE, str(tmp), MIRROR],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if p.returncode != 0:
        raise DevclusterError(f"mmdebstrap {SUITE} failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    shutil.rmtree(ROOT, ignore_errors=True)
    tmp.rename(ROOT)
    STAMP.write_text(_stamp() + "\n")
    say(f"{NAME}: root filesystem built in {time.monotonic() - t0:.0f} s")


# --------------------------------------------------------------------------- static setup


def ensure_user() -> None:
    if chroot_run(["id", USER], check=False).returncode != 0:
        chroot_run(["useradd", "--create-home", "--shell", "/bin/bash", USER])
    chroot_run(["usermod", "-p", "*", USER])  # no password, not locked: key login only
    home = inside(f"/home/{USER}")
    uid, gid = (
        int(x) for x in chroot_run(["sh", "-c", f"id -u {USER}; id -g {USER}"]).stdout.split()
    )
    sshdir = home / ".ssh"
    sshdir.mkdir(parents=True, exist_ok=True)
    pub = (REPO / ".devcluster" / "ssh" / "id_ed25519.pub").read_text().strip()
    write(sshdir / "authorized_keys", pub + "\n", mode=0o600)
    for p in (home, sshdir, sshdir / "authorized_keys"):
        os.chown(p, uid, gid)
    os.chmod(home, 0o755)
    os.chmod(sshdir, 0o700)


def ensure_sshd() -> bool:
    key = REPO / ".devcluster" / "ssh" / f"host_{NAME}_ed25519"
    changed = write(inside("/etc/ssh/ssh_host_ed25519_key"), key.read_bytes(), mode=0o600)
    write(inside("/etc/ssh/ssh_host_ed25519_key.pub"), key.with_suffix(".pub").read_bytes())
    inside("/run/sshd").mkdir(parents=True, exist_ok=True)
    os.chmod(inside("/run/sshd"), 0o755)
    changed |= write(
        inside("/etc/ssh/sshd_hpcui.conf"),
        f"""\
# hpcui dev cluster, site {NAME} (generated by scripts/devcluster up)
Port {SSHD_PORT}
ListenAddress 127.0.0.1
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd-hpcui.pid
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthenticationMethods publickey
UsePAM no
PermitRootLogin no
AllowUsers {USER}
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxStartups 200:30:400
MaxSessions 64
LogLevel VERBOSE
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
""",
        mode=0o600,
    )
    return changed


def ensure_hosts() -> None:
    lines = ["127.0.0.1 localhost", f"127.0.0.1 {LOGIN}", "::1 localhost ip6-localhost"]
    for n in NODES:
        lines += [f"{node_addr(n)} {n}", f"{interconnect_addr(n)} {n}{INTERCONNECT_SUFFIX}"]
    write(inside("/etc/hosts"), "\n".join(lines) + "\n")
    write(inside("/etc/hostname"), LOGIN + "\n")


def ensure_slurm_conf() -> bool:
    gpu = inside("/var/lib/hpcui-gpu")
    gpu.mkdir(parents=True, exist_ok=True)
    for i in range(4):  # count-only GPUs: character devices copied from /dev/null
        dev = gpu / f"nvidia{i}"
        if not (dev.exists() and stat.S_ISCHR(dev.stat().st_mode)):
            dev.unlink(missing_ok=True)
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    for d in ("/var/spool/slurmctld", "/var/log/hpcui", "/run/munge", "/run/mysqld"):
        inside(d).mkdir(parents=True, exist_ok=True)
    for n in NODES:
        inside(f"/var/spool/slurmd.{n}").mkdir(parents=True, exist_ok=True)
    nodes = "\n".join(
        f"NodeName={n} NodeAddr={node_addr(n)} NodeHostname={n} Port={node_port(n)} CPUs=8 "
        "Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 "
        "Gres=gpu:4 State=UNKNOWN"
        for n in NODES
    )
    slurm_conf = f"""\
# hpcui dev cluster, site {NAME} (generated by scripts/devcluster up -- do not edit)
ClusterName={NAME}
SlurmctldHost={LOGIN}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={SLURMCTLD_PORT}
AuthType=auth/munge
AuthInfo=cred_expire=20
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd.%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.%n.pid
SlurmctldLogFile=/var/log/hpcui/slurmctld.log
SlurmdLogFile=/var/log/hpcui/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=2000,bf_interval=1,bf_continue,bf_max_job_test=2000,max_rpc_cnt=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# fair share and priority factors, as at every centre (sprio/sshare show them)
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityWeightJobSize=100
PriorityWeightPartition=1000
PriorityWeightQOS=1000
DefMemPerCPU=500
EnforcePartLimits=ALL
GresTypes=gpu
KillWait=2
CompleteWait=0
MinJobAge=600
MaxJobCount=50000
MaxArraySize=10001
InactiveLimit=0
Waittime=0
OverTimeLimit=0
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=60
# 24.11 wants it at least 5 x MessageTimeout (22.05 did not check)
UnkillableStepTimeout=60
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={SLURMDBD_PORT}
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
# batch scripts kept in the database, as many centres do (sacct --batch-script)
AccountingStoreFlags=job_script
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=2
JobCompType=jobcomp/none
{nodes}
PartitionName=cpu Nodes={node_range()} Default=YES MaxTime=02:00:00 State=UP
PartitionName=gpu Nodes={node_range()} MaxTime=02:00:00 State=UP
"""
    gres_conf = (
        f"AutoDetect=off\nNodeName={node_range()} Name=gpu File=/var/lib/hpcui-gpu/nvidia[0-3]\n"
    )
    dbd_conf = f"""\
# hpcui dev cluster, site {NAME} (generated by scripts/devcluster up -- do not edit)
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={SLURMDBD_PORT}
SlurmUser=root
DebugLevel=info
LogFile=/var/log/hpcui/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=hpcui-devcluster
StorageLoc=slurm_acct_db
"""
    changed = write(inside("/etc/slurm/slurm.conf"), slurm_conf)
    # the same cluster seen through a configuration without SPANK plugins, as a login node of
    # a site without pyxis sees it (SLURM_CONF=...: the "pyxis is not installed" test)
    write(inside(NO_PYXIS_CONF), slurm_conf + "PlugStackConfig=/etc/slurm/plugstack-none.conf\n")
    write(inside("/etc/slurm/plugstack-none.conf"), "# no SPANK plugin\n")
    changed |= write(inside("/etc/slurm/gres.conf"), gres_conf)
    write(inside("/etc/slurm/slurmdbd.conf"), dbd_conf, mode=0o600)
    return changed


def _placeholder(name: str, version: str, what: str) -> str:
    return (
        f"help([[{what} {version} (placeholder: sets a variable only)]])\n"
        f'whatis("Name: {name}")\nwhatis("Version: {version}")\n'
        f'whatis("Description: {what} (placeholder)")\n'
        f'setenv("HPCUI_{name.upper()}_VERSION", "{version}")\n'
    )


LUA = {
    "python/3.11.lua": f"""\
help([[Python 3.11 (CPython under {PY311}) -- hpcui dev cluster site {NAME}]])
whatis("Name: python")
whatis("Version: 3.11")
whatis("Description: Python programming language")
family("python")
prepend_path("PATH", "{PY311}/bin")
prepend_path("LD_LIBRARY_PATH", "{PY311}/lib")
""",
    "cuda/12.2.lua": """\
help([[CUDA 12.2 (placeholder: the dev cluster's GPUs are count-only)]])
whatis("Name: cuda")
whatis("Version: 12.2")
whatis("Description: NVIDIA CUDA toolkit (placeholder)")
family("cuda")
setenv("CUDA_HOME", "/opt/sw/cuda/12.2")
setenv("CUDA_VERSION", "12.2")
""",
    "cuda/12.4.lua": """\
help([[CUDA 12.4 (placeholder: the dev cluster's GPUs are count-only)]])
whatis("Name: cuda")
whatis("Version: 12.4")
whatis("Description: NVIDIA CUDA toolkit (placeholder)")
family("cuda")
setenv("CUDA_HOME", "/opt/sw/cuda/12.4")
setenv("CUDA_VERSION", "12.4")
""",
    f"pytorch/{TORCH_VERSION}.lua": f"""\
help([[PyTorch {TORCH_VERSION} (CPU build) in the venv {TORCH_VENV}]])
whatis("Name: pytorch")
whatis("Version: {TORCH_VERSION}")
whatis("Description: PyTorch deep learning framework (CPU build)")
depends_on("python/3.11")
setenv("VIRTUAL_ENV", "{TORCH_VENV}")
prepend_path("PATH", "{TORCH_VENV}/bin")
""",
    # placeholders for the shapes of Lmod 8.7.27+'s alias lines and hidden versions
    "gcc/13.2.0.lua": _placeholder("gcc", "13.2.0", "GNU compilers"),
    "nvhpc/23.11.lua": _placeholder("nvhpc", "23.11", "NVIDIA HPC SDK"),
    "nvhpc/24.4.0.lua": _placeholder("nvhpc", "24.4.0", "NVIDIA HPC SDK (hidden version)"),
    "nccl/2.18.lua": _placeholder("nccl", "2.18", "NVIDIA collective communications"),
    "nccl/.2.21.lua": _placeholder("nccl", ".2.21", "NCCL test build, hidden by its dot"),
    # what the first site lacks: an alias (`module load torch`) and a hidden module; a
    # version alias (`gcc/13`), a hidden version loaded through an alias (`nvhpc/24`)
    ".modulerc.lua": f"""\
module_alias("torch", "pytorch/{TORCH_VERSION}")
hide_version("cuda/12.2")
module_version("gcc/13.2.0", "13")
hide_version("nvhpc/24.4.0")
module_alias("nvhpc/24", "nvhpc/24.4.0")
""",
}
DEFAULTS = {"python": "3.11.lua", "cuda": "12.4.lua"}


def ensure_lmod() -> None:
    mf = inside(MODULEFILES)
    for rel, text in LUA.items():
        write(mf / rel, text)
    for mod, target in DEFAULTS.items():
        link = mf / mod / "default"
        if not (link.is_symlink() and os.readlink(link) == target):
            link.unlink(missing_ok=True)
            link.symlink_to(target)
    modulespath = inside("/etc/lmod/modulespath")
    text = modulespath.read_text()
    if str(MODULEFILES) not in text.split():
        modulespath.write_text(text.rstrip("\n") + f"\n{MODULEFILES}\n")


def ensure_python311() -> None:
    """CPython 3.11 under /opt/python/3.11: Debian 12's interpreter and standard library
    (this machine's python3.11 packages), relocated; it finds its library next to itself."""
    dest = inside(PY311)
    marker = dest / ".hpcui-source"
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "python3.11-minimal"], capture_output=True, text=True
    ).stdout.strip()
    if marker.exists() and marker.read_text() == version and (dest / "bin/python3.11").exists():
        return
    say(f"{NAME}: installing Python 3.11 ({version}) under {PY311}")
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "bin").mkdir(parents=True)
    (dest / "lib").mkdir()
    shutil.copy2("/usr/bin/python3.11", dest / "bin" / "python3.11")
    for n in ("python3", "python"):
        (dest / "bin" / n).symlink_to("python3.11")
    shutil.copytree(
        "/usr/lib/python3.11",
        dest / "lib" / "python3.11",
        symlinks=True,
        ignore=shutil.ignore_patterns("__pycache__", "dist-packages", "test"),
    )
    # trixie has libmpdec4; Debian 12's _decimal wants libmpdec.so.3 (the module sets
    # LD_LIBRARY_PATH, as site modulefiles do for their own builds)
    for lib in Path("/usr/lib/x86_64-linux-gnu").glob("libmpdec.so.3*"):
        shutil.copy2(lib, dest / "lib" / lib.name, follow_symlinks=True)
    probe = chroot_run(
        ["env", f"LD_LIBRARY_PATH={PY311}/lib", f"{PY311}/bin/python3",
         "-c", "import sys, ssl, decimal, sqlite3, ctypes, venv; print(sys.prefix)"],
        check=False,
    )  # fmt: skip
    if probe.returncode != 0 or probe.stdout.strip() != str(PY311):
        raise DevclusterError(f"{NAME}: {PY311}/bin/python3 does not work:\n{probe.stderr}")
    marker.write_text(version)


def ensure_torch_venv() -> None:
    """The pytorch module's venv, installed from wheels fetched on this machine."""
    venv = inside(TORCH_VENV)
    marker = venv / ".hpcui-requirements"
    wanted = f"torch=={TORCH_VERSION} numpy {JUPYTERLAB} {TENSORBOARD}\n"
    if marker.exists() and marker.read_text() == wanted:
        return
    say(f"{NAME}: preparing {TORCH_VENV} (first time only, takes a minute)")
    wheels = inside(WHEELS_IN)
    wheels.mkdir(parents=True, exist_ok=True)
    host_pip = ["/opt/hpcui-devcluster/venv/bin/python", "-m", "pip"]  # the first site's 3.11
    p = subprocess.run(
        [*host_pip, "download", "--quiet", "--dest", str(wheels), f"torch=={TORCH_VERSION}",
         "numpy", JUPYTERLAB, TENSORBOARD, "pip"],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if p.returncode != 0:
        raise DevclusterError(f"{NAME}: pip download failed:\n{p.stdout}{p.stderr}")
    pip_whl = sorted(wheels.glob("pip-*.whl"))[-1].name
    shutil.rmtree(venv, ignore_errors=True)
    env = ["env", f"LD_LIBRARY_PATH={PY311}/lib"]
    chroot_run([*env, f"{PY311}/bin/python3", "-m", "venv", "--without-pip", str(TORCH_VENV)])
    chroot_run(
        [*env, f"{TORCH_VENV}/bin/python", f"{WHEELS_IN}/{pip_whl}/pip", "install", "--quiet",
         "--no-index", "--find-links", str(WHEELS_IN), f"torch=={TORCH_VERSION}", "numpy",
         JUPYTERLAB, TENSORBOARD],
        timeout=1800,
    )  # fmt: skip
    shutil.rmtree(wheels, ignore_errors=True)
    marker.write_text(wanted)


# --------------------------------------------------------------------------- daemons


def mysql(sql: str) -> subprocess.CompletedProcess:
    return chroot_run(
        ["mariadb", "--no-defaults", "-S", "/run/mysqld/mysqld.sock", "-u", "root", "-N", "-B",
         "-e", sql],
        check=False, timeout=20,
    )  # fmt: skip


def sacctmgr_ok() -> bool:
    p = chroot_run(["sacctmgr", "-n", "-P", "show", "cluster"], check=False, timeout=15)
    return p.returncode == 0


def start_munged() -> None:
    if running_pid("munged"):
        return
    MUNGE_KEY_HOST.parent.mkdir(parents=True, exist_ok=True)
    if not MUNGE_KEY_HOST.exists():
        write(MUNGE_KEY_HOST, os.urandom(1024), mode=0o600)
    write(inside("/etc/munge/munge.key"), MUNGE_KEY_HOST.read_bytes(), mode=0o600)
    os.chown(inside("/etc/munge/munge.key"), 0, 0)
    inside("/run/munge/munge.socket.2").unlink(missing_ok=True)
    spawn("munged", ["/usr/sbin/munged", "-F", "--force", "--log-file=/var/log/hpcui/munged.log"])
    wait_for(
        f"{NAME} munged",
        lambda: running_pid("munged") and chroot_run(["munge", "-n"], check=False).returncode == 0,
        [log_path("munged.out"), log_path("munged.log")],
    )


def start_mariadb() -> None:
    if running_pid("mariadb"):
        return
    ready = inside("/var/lib/mysql/.hpcui-ready")
    os.chown(inside("/run/mysqld"), *_ids("mysql"))
    inside("/run/mysqld/mysqld.sock").unlink(missing_ok=True)
    spawn(
        "mariadb",
        ["/usr/sbin/mariadbd", "--no-defaults", "--user=mysql", "--datadir=/var/lib/mysql",
         "--socket=/run/mysqld/mysqld.sock", "--skip-networking",
         "--log-error=/var/log/hpcui/mariadb.log", "--innodb-buffer-pool-size=128M",
         "--innodb-flush-log-at-trx-commit=2", "--max-connections=200"],
    )  # fmt: skip
    wait_for(
        f"{NAME} mariadb",
        lambda: running_pid("mariadb") and mysql("SELECT 1").returncode == 0,
        [log_path("mariadb.out"), log_path("mariadb.log")],
    )
    if not ready.exists():
        p = mysql(
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
            "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'hpcui-devcluster';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
        )
        if p.returncode != 0:
            raise DevclusterError(f"{NAME}: creating the slurm database user failed:\n{p.stderr}")
        ready.write_text("ok\n")


def _ids(user: str) -> tuple[int, int]:
    for line in inside("/etc/passwd").read_text().splitlines():
        f = line.split(":")
        if f[0] == user:
            return int(f[2]), int(f[3])
    raise DevclusterError(f"{NAME}: no user {user} in the site's /etc/passwd")


def start_slurmdbd() -> None:
    if running_pid("slurmdbd"):
        return
    check_port_free(SLURMDBD_PORT, "slurmdbd")
    spawn("slurmdbd", ["/usr/sbin/slurmdbd", "-D"])
    wait_for(
        f"{NAME} slurmdbd (sacctmgr)",
        lambda: running_pid("slurmdbd") and sacctmgr_ok(),
        [log_path("slurmdbd.out"), log_path("slurmdbd.log")],
    )


def ensure_accounting() -> None:
    def show(*args: str) -> list[list[str]]:
        out = chroot_run(["sacctmgr", "-n", "-P", "show", *args], timeout=30).stdout
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def mgr(*args: str) -> None:
        chroot_run(["sacctmgr", "-i", "-n", "-P", *args], timeout=30)

    if [NAME] not in show("cluster", "format=cluster"):
        mgr("add", "cluster", NAME)
    qos = {r[0] for r in show("qos", "format=name")}
    if "normal" not in qos:
        mgr("add", "qos", "normal")
    if "debug" not in qos:
        mgr("add", "qos", "debug", "MaxWall=00:30:00", "Flags=DenyOnLimit",
            "Description=short debug jobs")  # fmt: skip
    if [ACCOUNT] not in show("account", "format=account"):
        mgr("add", "account", ACCOUNT, f"Cluster={NAME}", "Description=hpcui dev cluster")
    have = {(a[0], a[1]) for a in show("assoc", "where", f"cluster={NAME}", "format=account,user")}
    for user in (USER, "root"):
        if (ACCOUNT, user) not in have:
            mgr("add", "user", user, f"Account={ACCOUNT}", f"Cluster={NAME}",
                f"DefaultAccount={ACCOUNT}", "qos=normal,debug", "defaultqos=normal")  # fmt: skip


def start_slurmctld(conf_changed: bool) -> None:
    if running_pid("slurmctld"):
        if not conf_changed:
            return
        stop("slurmctld")
    check_port_free(SLURMCTLD_PORT, "slurmctld")
    spawn("slurmctld", ["/usr/sbin/slurmctld", "-D"], hostname=LOGIN)
    wait_for(
        f"{NAME} slurmctld",
        lambda: (
            running_pid("slurmctld")
            and "is UP" in chroot_run(["scontrol", "ping"], check=False, timeout=15).stdout
        ),
        [log_path("slurmctld.out"), log_path("slurmctld.log")],
    )


def start_slurmd(node: str, restart: bool = False) -> None:
    comp = f"slurmd-{node}"
    if running_pid(comp):
        if not restart:
            return
        stop(comp)
    check_port_free(node_port(node), comp, node_addr(node))
    spawn(comp, ["/usr/sbin/slurmd", "-D", "-N", node], hostname=node, tmpfs_tmp=True)


def node_state(node: str) -> str:
    p = chroot_run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], check=False, timeout=15)
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else ""


def wait_nodes() -> None:
    resumed: set[str] = set()

    def ok() -> bool:
        ready = True
        for node in NODES:
            st = node_state(node)
            base = st.rstrip("*~#!%$@^-+")
            if base in ("idle", "mixed", "allocated", "completing"):
                ready &= not st.endswith("*")
                continue
            ready = False
            if ("drain" in base or base == "down") and node not in resumed:
                resumed.add(node)
                chroot_run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)
        return ready

    wait_for(
        f"{NAME} nodes {node_range()} (idle in sinfo)",
        ok,
        [*(log_path(f"slurmd.{n}.log") for n in NODES), log_path("slurmctld.log")],
    )


def start_sshd(changed: bool) -> None:
    pid = running_pid("sshd")
    if pid:
        if changed:
            os.kill(pid, signal.SIGHUP)
        return
    check_port_free(SSHD_PORT, "sshd")
    t = chroot_run(["/usr/sbin/sshd", "-t", "-f", "/etc/ssh/sshd_hpcui.conf"], check=False)
    if t.returncode != 0:
        raise DevclusterError(f"{NAME}: sshd config is invalid:\n{t.stdout}{t.stderr}")
    spawn(
        "sshd",
        ["/usr/sbin/sshd", "-D", "-f", "/etc/ssh/sshd_hpcui.conf", "-E", "/var/log/hpcui/sshd.log"],
        hostname=LOGIN,
    )


# --------------------------------------------------------------------------- entry points


def up() -> None:
    t0 = time.monotonic()
    (STATE / "run").mkdir(parents=True, exist_ok=True)
    ensure_rootfs()
    ensure_hosts()
    ensure_user()
    sshd_changed = ensure_sshd()
    conf_changed = ensure_slurm_conf()
    conf_changed = containers.up_in_root(ROOT) or conf_changed  # enroot, pyxis, stand-in
    ensure_lmod()
    ensure_python311()
    start_munged()
    start_mariadb()
    start_slurmdbd()
    ensure_accounting()
    start_slurmctld(conf_changed)
    for node in NODES:
        start_slurmd(node, restart=conf_changed)
    start_sshd(sshd_changed)
    ensure_torch_venv()
    wait_nodes()
    wait_for(
        f"{NAME} sshd",
        lambda: running_pid("sshd") and ssh_banner(SSHD_PORT),
        [log_path("sshd.out"), log_path("sshd.log")],
    )
    say(f"{NAME}: up in {time.monotonic() - t0:.1f} s")


def down() -> list[str]:
    return [f"{NAME}/{n}" for n in reversed(COMPONENTS) if stop(n)]


def status() -> bool:
    ok = True
    for name in COMPONENTS:
        pid = running_pid(name)
        ok &= pid is not None
        extra = {
            "sshd": f"127.0.0.1:{SSHD_PORT}",
            "slurmctld": f"127.0.0.1:{SLURMCTLD_PORT}",
            "slurmdbd": f"127.0.0.1:{SLURMDBD_PORT}",
            "mariadb": "/run/mysqld/mysqld.sock",
            "munged": "/run/munge/munge.socket.2",
        }.get(name, "")
        if name.startswith("slurmd-"):
            node = name.removeprefix("slurmd-")
            extra = f"{node_addr(node)}:{node_port(node)} node {node}"
        state = f"running  pid {pid}" if pid else "stopped"
        print(f"{NAME}/{name:<14} {state:<18} {extra}")
    return ok


def dbd_stop() -> bool:
    return stop("slurmdbd")


def dbd_start() -> None:
    if not running_pid("mariadb") or not running_pid("munged"):
        raise DevclusterError(f"site {NAME} is not up: run scripts/devcluster up")
    start_slurmdbd()


def diagnose() -> str:
    return "\n".join(f"--- {n}:\n{tail(log_path(n))}" for n in ("slurmctld.log", "sshd.log"))
