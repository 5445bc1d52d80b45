"""The PBS site of the dev cluster (issue 31): real OpenPBS (PBS Professional's open
source, 23.06) built from ../shared/vendor, on hosts in network namespaces.

PBS refuses a host whose name resolves only to loopback, so the site lives in network
namespaces this script creates, each with its own UTS namespace (host name):

    pbs-head  10.77.0.1   pbs_server (+ its PostgreSQL datastore), pbs_sched, pbs_comm,
                          and the login sshd (a PBS client host, as login nodes are)
    pbs-n1    10.77.0.11  pbs_mom, 4 ngpus (count only, as on the Slurm sites)
    pbs-n2    10.77.0.12  pbs_mom, 4 ngpus

joined by a bridge inside pbs-head's namespace. No address outside loopback exists in the
root namespace: hpcui reaches the login sshd through 127.0.0.1:2226, where socat carries
each connection into pbs-head's namespace. Names resolve inside the namespaces only
(/etc/netns/<ns>/hosts, which `ip netns exec` puts over /etc/hosts). The file system is
shared, as a site's home and scratch are: the moms copy output with `$usecp`.

The build is cached under /opt/hpcui-devcluster/pbs, keyed by the tarball's SHA-256 (about
2-3 minutes on 2 cores the first time; the README beside the tarball says 8 on busy ones). A clone without ../shared/vendor gets one line saying
the PBS site is skipped; the tests that need it skip with that reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from devcluster_common import REPO, DevclusterError, run, say, ssh_banner, tail, wait_for, write

NAME = "pbs"
VENDOR = REPO.parent / "shared" / "vendor"
PREFIX = Path("/opt/hpcui-devcluster/pbs")
BUILD = Path("/var/lib/hpcui-devcluster/build")
STAMP = PREFIX / ".hpcui-source-sha256"
SKIPPED_FILE = Path("/run/hpcui-devcluster/pbs-skipped")
SPOOL = Path("/var/spool/hpcui-pbs")
ETC = Path("/etc/hpcui-pbs")
CONF = Path("/etc/pbs.conf")  # the compiled-in default: the login host's client commands read it
UTS = Path("/run/hpcui-pbs")  # persistent UTS namespaces (bind mounts), one file per host
#: pid files and logs of the login sshd and its socat bridge: like the PBS daemons, one set
#: per machine (a second clone's `up` finds them running and takes them over)
STATE = Path("/run/hpcui-pbs/login")
HEAD = "pbs-head"
MOMS = ["pbs-n1", "pbs-n2"]
ADDR = {HEAD: "10.77.0.1", "pbs-n1": "10.77.0.11", "pbs-n2": "10.77.0.12"}
NETNS = {h: f"hpcui-{h}" for h in ADDR}
BRIDGE = "hpcuibr0"
SSHD_PORT = 2226  # on 127.0.0.1 of the root namespace (socat into pbs-head's sshd on :22)
GPUS_PER_HOST = 4
NCPUS_PER_HOST = 8  # declared to the server (the moms see this machine's 2 cores)
MEM_PER_HOST = "16gb"
#: ASPIRE-like queues: an AI/GPU one and a normal one, walltime limits (qmgr below)
QUEUES = {"normal": "24:00:00", "ai": "12:00:00"}
SSHD_CONF = ETC / "sshd_login.conf"


def tarball() -> Path | None:
    found = sorted(VENDOR.glob("openpbs-*.tar.xz")) if VENDOR.is_dir() else []
    return found[-1] if found else None


def available() -> str | None:
    """None when the source is here; else the one line that says what is skipped."""
    if tarball() is None:
        return (
            f"pbs site skipped: no openpbs source in {VENDOR} (OpenPBS is not built or started; "
            "the tests of the real PBS site skip)"
        )
    return None


# --------------------------------------------------------------------------- build


def ensure_built() -> None:
    """OpenPBS from the tarball, installed under PREFIX; again only when the tarball changes."""
    src = tarball()
    assert src is not None
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == want:
        return
    t0 = time.monotonic()
    say(f"building OpenPBS from {src.name} (first time: 2-3 minutes on 2 cores)")
    shutil.rmtree(BUILD / "openpbs", ignore_errors=True)
    (BUILD / "openpbs").mkdir(parents=True)
    run(["tar", "-xJf", str(src), "-C", str(BUILD / "openpbs")], timeout=300)
    (top,) = [p for p in (BUILD / "openpbs").iterdir() if p.is_dir()]
    # configure takes the first python3 on PATH for PBS's embedded Python: Debian's
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    jobs = str(max(1, os.cpu_count() or 1))
    for argv, limit in (
        (["./autogen.sh"], 600),
        (["./configure", f"--prefix={PREFIX}"], 600),
        (["make", "-j", jobs], 3600),
        (["make", "install"], 600),
    ):
        p = subprocess.run(argv, cwd=top, env=env, capture_output=True, text=True, timeout=limit)
        if p.returncode != 0:
            log = STATE / "build.log"
            write(log, p.stdout + p.stderr)
            raise DevclusterError(
                f"building OpenPBS failed at `{' '.join(argv)}` (rc={p.returncode}); "
                f"its output is in {log}:\n{tail(log)}"
            )
    _setuid()
    STAMP.write_text(want + "\n")
    shutil.rmtree(BUILD / "openpbs", ignore_errors=True)
    say(f"OpenPBS built and installed in {PREFIX} in {time.monotonic() - t0:.0f} s")


def _setuid() -> None:
    """What PBS's RPM spec does (`%attr(4755, root, root)`): a user's qsub authenticates
    through pbs_iff, and pbs_rcp copies output back; make install leaves them 0755."""
    for tool in ("pbs_iff", "pbs_rcp"):
        os.chmod(PREFIX / "sbin" / tool, 0o4755)


# --------------------------------------------------------------------------- hosts


def _netns_exists(ns: str) -> bool:
    return Path("/run/netns", ns).exists()


def ensure_network() -> None:
    """The namespaces, the bridge, the veth pairs, and each host's name and hosts file."""
    hosts = "127.0.0.1 localhost\n" + "".join(f"{a} {h}\n" for h, a in ADDR.items())
    for host, ns in NETNS.items():
        write(Path("/etc/netns") / ns / "hosts", hosts)
        if not _netns_exists(ns):
            run(["ip", "netns", "add", ns])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        uts = UTS / f"uts-{host}"
        if not _is_mountpoint(uts):
            UTS.mkdir(parents=True, exist_ok=True)
            uts.touch()
            run(["unshare", f"--uts={uts}", "hostname", host])
    head = NETNS[HEAD]
    if run(["ip", "-n", head, "link", "show", BRIDGE], check=False).returncode != 0:
        run(["ip", "-n", head, "link", "add", BRIDGE, "type", "bridge"])
        run(["ip", "-n", head, "addr", "add", f"{ADDR[HEAD]}/24", "dev", BRIDGE])
    run(["ip", "-n", head, "link", "set", BRIDGE, "up"])
    for i, mom in enumerate(MOMS, start=1):
        port = f"vpbs{i}"
        if run(["ip", "-n", head, "link", "show", port], check=False).returncode != 0:
            run(["ip", "-n", head, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                 "netns", NETNS[mom]])  # fmt: skip
            run(["ip", "-n", NETNS[mom], "addr", "add", f"{ADDR[mom]}/24", "dev", "eth0"])
        run(["ip", "-n", head, "link", "set", port, "master", BRIDGE, "up"])
        run(["ip", "-n", NETNS[mom], "link", "set", "eth0", "up"])


def _is_mountpoint(path: Path) -> bool:
    return path.exists() and run(["mountpoint", "-q", str(path)], check=False).returncode == 0


def on(host: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """argv run on `host`: its network namespace (and hosts file), then its host name."""
    envs = [f"{k}={v}" for k, v in (env or {}).items()]
    return ["ip", "netns", "exec", NETNS[host], "nsenter", f"--uts={UTS / f'uts-{host}'}",
            "env", *envs, *argv]  # fmt: skip


def run_on(host: str, argv: list[str], *, env: dict[str, str] | None = None,
           check: bool = True, timeout: float = 120, input: str | None = None
           ) -> subprocess.CompletedProcess:  # fmt: skip
    return run(on(host, argv, env), check=check, timeout=timeout, input=input)


# --------------------------------------------------------------------------- PBS


def mom_conf(mom: str) -> Path:
    return ETC / f"pbs-{mom}.conf"


def ensure_conf() -> None:
    """pbs.conf for the head (server, scheduler, comm; the login host's clients read it
    too) and one per mom (its own PBS_HOME), and each mom's config ($usecp)."""
    common = (
        f"PBS_EXEC={PREFIX}\nPBS_SERVER={HEAD}\nPBS_CORE_LIMIT=unlimited\nPBS_SCP=/usr/bin/scp\n"
    )
    write(
        CONF,
        common + f"PBS_HOME={SPOOL / 'head'}\nPBS_START_SERVER=1\nPBS_START_SCHED=1\n"
        "PBS_START_COMM=1\nPBS_START_MOM=0\n",
    )
    for mom in MOMS:
        write(
            mom_conf(mom),
            common + f"PBS_HOME={SPOOL / mom}\nPBS_START_SERVER=0\nPBS_START_SCHED=0\n"
            f"PBS_START_COMM=0\nPBS_START_MOM=1\nPBS_LEAF_ROUTERS={HEAD}\n",
        )


def _pbs_env(conf: Path) -> dict[str, str]:
    return {
        "PBS_CONF_FILE": str(conf),
        "PATH": f"{PREFIX}/bin:{PREFIX}/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
    }


def _lock_pid(lock: Path) -> int | None:
    """The daemon named in its lock file, if that process is a PBS program: the lock files
    outlive a reboot in /var/spool, and their pid may then belong to anything."""
    try:
        pid = int(lock.read_text().split()[0])
        exe = os.readlink(f"/proc/{pid}/exe")
        return pid if exe.startswith(f"{PREFIX}/") else None
    except (OSError, ValueError, IndexError):
        return None


LOCKS = {
    "pbs_server": SPOOL / "head" / "server_priv" / "server.lock",
    "pbs_sched": SPOOL / "head" / "sched_priv" / "sched.lock",
    "pbs_comm": SPOOL / "head" / "server_priv" / "comm.lock",
    **{f"pbs_mom-{m}": SPOOL / m / "mom_priv" / "mom.lock" for m in MOMS},
}


def daemon_pid(name: str) -> int | None:
    return _lock_pid(LOCKS[name])


def ensure_head() -> None:
    """First start: PBS_HOME, the datastore and the server's data (pbs_habitat, as the init
    script does); then the daemons through PBS's own init script."""
    env = _pbs_env(CONF)
    if not (SPOOL / "head" / "server_priv").exists():
        say("pbs: first start of pbs-head (PBS_HOME, datastore, server data)")
        run_on(HEAD, [f"{PREFIX}/libexec/pbs_habitat"], env=env, timeout=600)
    if all(daemon_pid(n) for n in ("pbs_comm", "pbs_server", "pbs_sched")):
        return
    run_on(HEAD, [f"{PREFIX}/libexec/pbs_init.d", "start"], env=env, timeout=300)


def ensure_moms() -> None:
    for mom in MOMS:
        if daemon_pid(f"pbs_mom-{mom}"):
            continue
        env = _pbs_env(mom_conf(mom))
        home = SPOOL / mom
        if not (home / "mom_priv").exists():
            run_on(mom, [f"{PREFIX}/libexec/pbs_habitat"], env=env, timeout=300)
        # the file system is shared: output goes back by cp, not scp
        write(home / "mom_priv" / "config", f"$clienthost {HEAD}\n$usecp *:/ /\n$logevent 0x1ff\n")
        run_on(mom, [f"{PREFIX}/sbin/pbs_mom"], env=env, timeout=120)


def qmgr(commands: str) -> str:
    return run_on(HEAD, [f"{PREFIX}/bin/qmgr"], env=_pbs_env(CONF), input=commands).stdout


def ensure_sched_config() -> None:
    """The scheduler counts ngpus (PBS Pro sites add it to sched_config's resources)."""
    cfg = SPOOL / "head" / "sched_priv" / "sched_config"
    text = cfg.read_text()
    old = 'resources: "ncpus, mem, arch, host, vnode, aoe, eoe"'
    if old in text:
        cfg.write_text(
            text.replace(old, 'resources: "ncpus, mem, arch, host, vnode, aoe, eoe, ngpus"')
        )
        pid = daemon_pid("pbs_sched")
        if pid:
            os.kill(pid, signal.SIGHUP)


def ensure_site() -> None:
    """Nodes (4 ngpus each), ASPIRE-like queues, job history, the scheduler on."""
    have = run_on(HEAD, [f"{PREFIX}/bin/pbsnodes", "-a"], env=_pbs_env(CONF), check=False).stdout
    resources = run_on(HEAD, [f"{PREFIX}/bin/qmgr", "-c", "list resource ngpus"],
                       env=_pbs_env(CONF), check=False)  # fmt: skip
    lines = [] if resources.returncode == 0 else ["create resource ngpus type=long, flag=nh"]
    for mom in MOMS:
        if f"\n{mom}\n" not in f"\n{have}":
            lines.append(f"create node {mom}")
        lines += [
            f"set node {mom} resources_available.ngpus = {GPUS_PER_HOST}",
            f"set node {mom} resources_available.ncpus = {NCPUS_PER_HOST}",
            f"set node {mom} resources_available.mem = {MEM_PER_HOST}",
        ]
    queues = run_on(HEAD, [f"{PREFIX}/bin/qstat", "-Q"], env=_pbs_env(CONF), check=False).stdout
    for q, walltime in QUEUES.items():
        if f"\n{q} " not in f"\n{queues}":
            lines.append(f"create queue {q} queue_type = execution")
        lines += [
            f"set queue {q} enabled = true",
            f"set queue {q} started = true",
            f"set queue {q} resources_max.walltime = {walltime}",
        ]
    lines += [
        "set queue ai resources_max.ngpus = 8",
        "set server default_queue = normal",
        "set server job_history_enable = true",
        # long enough for any test (minutes); a day's history of several suite runs (1,100
        # jobs, arrays of 100) made every scheduler cycle and `qstat -x` of them slow
        "set server job_history_duration = 02:00:00",
        "set server scheduling = true",
        "set server scheduler_iteration = 2",
        "set server flatuid = true",
        f"set server acl_hosts += {HEAD}",
        "set server node_fail_requeue = 0",
    ]
    if "\nworkq " in f"\n{queues}":
        lines.append("delete queue workq")
    qmgr("\n".join(lines) + "\n")


def wait_nodes() -> None:
    def free() -> bool:
        out = run_on(HEAD, [f"{PREFIX}/bin/pbsnodes", "-a"], env=_pbs_env(CONF), check=False).stdout
        return out.count("state = free") >= len(MOMS)

    wait_for("pbs moms (2 hosts free)", free,
             [SPOOL / m / "mom_logs" / time.strftime("%Y%m%d") for m in MOMS], timeout=120)  # fmt: skip


# --------------------------------------------------------------------------- login

PROFILE = Path("/etc/profile.d/hpcui-pbs.sh")


def ensure_profile() -> None:
    """PBS's commands on PATH on the PBS site's hosts only (the first site's login node has
    Slurm's Torque wrappers as qsub): a login shell there, and every job's shell."""
    hosts = "|".join([HEAD, *MOMS])
    write(
        PROFILE,
        "# hpcui dev cluster (scripts/devcluster_pbs.py): OpenPBS's commands on its hosts\n"
        f'case "$(hostname)" in {hosts}) PATH="{PREFIX}/bin:$PATH"; export PATH ;; esac\n',
    )


def ensure_sshd(host_key: Path, user: str) -> bool:
    """The login sshd's config (inside pbs-head, port 22 of its own loopback) and the host
    key the clone's known_hosts pins (copied: a running sshd may belong to another clone)."""
    key = ETC / "ssh_host_ed25519_key"
    changed = write(key, host_key.read_bytes(), mode=0o600)
    changed = (
        write(key.with_name(key.name + ".pub"), host_key.with_suffix(".pub").read_bytes())
        or changed
    )
    return (
        write(
            SSHD_CONF,
            f"""# hpcui dev cluster: the PBS site's login sshd (scripts/devcluster_pbs.py)
ListenAddress 127.0.0.1
Port 22
HostKey {key}
PidFile none
AllowUsers {user}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
PermitRootLogin no
X11Forwarding no
AllowTcpForwarding yes
Subsystem sftp internal-sftp
# a command without a login shell finds PBS's qsub before the Torque wrappers' /usr/bin/qsub
SetEnv PATH={PREFIX}/bin:/usr/local/bin:/usr/bin:/bin
MaxStartups 100:30:200
MaxSessions 100
LogLevel ERROR
""",
        )
        or changed
    )


def _spawn(name: str, argv: list[str]) -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    log = STATE / f"{name}.log"
    with open(log, "ab") as lf:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True, cwd="/")  # fmt: skip
    (STATE / f"{name}.pid").write_text(f"{p.pid}\n")
    return p.pid


def _pid(name: str) -> int | None:
    try:
        pid = int((STATE / f"{name}.pid").read_text().split()[0])
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
        return None if stat[stat.rindex(")") + 2] in "ZX" else pid
    except (OSError, ValueError, IndexError):
        return None


def start_login(changed: bool) -> None:
    pid = _pid("sshd")
    if pid and changed:
        os.kill(pid, signal.SIGHUP)
    if not pid:
        run_on(HEAD, ["/usr/sbin/sshd", "-t", "-f", str(SSHD_CONF)])
        _spawn("sshd", on(HEAD, ["/usr/sbin/sshd", "-D", "-e", "-f", str(SSHD_CONF)]))
    if not _pid("bridge"):  # one socat per connection, started inside pbs-head's namespace
        inner = ETC / "login-bridge"
        write(inner, f"#!/bin/sh\nexec ip netns exec {NETNS[HEAD]} socat STDIO TCP:127.0.0.1:22\n",
              mode=0o755)  # fmt: skip
        _spawn("bridge", ["socat", f"TCP-LISTEN:{SSHD_PORT},bind=127.0.0.1,reuseaddr,fork",
                          f"EXEC:{inner}"])  # fmt: skip
    wait_for(
        "pbs login sshd", lambda: ssh_banner(SSHD_PORT), [STATE / "sshd.log", STATE / "bridge.log"]
    )


#: the site's package index (pypiserver, installed with its wheels by scripts/install-deps):
#: on the login host's own loopback, so its compute nodes cannot reach it (as at JSC, where
#: login nodes reach PyPI and compute nodes nothing); no fallback to pypi.org
INDEX_VENV = Path("/opt/hpcui-devcluster/pypiserver")
INDEX_DIR = Path("/var/lib/hpcui-devcluster/index")
INDEX_PORT = 8080
INDEX_URL = f"http://127.0.0.1:{INDEX_PORT}/simple/"


def start_index() -> None:
    if _pid("index"):
        return
    server = INDEX_VENV / "bin" / "pypi-server"
    if not server.exists():
        raise DevclusterError(f"{server} is missing: run scripts/install-deps")
    _spawn("index", on(HEAD, [str(server), "run", "--host", "127.0.0.1", "--port",
                              str(INDEX_PORT), "--disable-fallback", str(INDEX_DIR)]))  # fmt: skip

    def answers() -> bool:
        res = run_on(HEAD, ["python3", "-c", f"import urllib.request as u; u.urlopen({INDEX_URL!r}, timeout=2)"],
                     check=False, timeout=10)  # fmt: skip
        return res.returncode == 0

    wait_for("pbs site's package index", answers, [STATE / "index.log"])


# --------------------------------------------------------------------------- commands


def up(host_key: Path, user: str) -> None:
    skipped = available()
    if skipped:
        say(skipped)
        write(SKIPPED_FILE, skipped + "\n")
        return
    SKIPPED_FILE.unlink(missing_ok=True)
    t0 = time.monotonic()
    ensure_built()
    ensure_network()
    ensure_conf()
    changed = ensure_sshd(host_key, user)
    ensure_profile()
    ensure_head()
    ensure_sched_config()
    ensure_moms()
    ensure_site()
    start_login(changed)
    start_index()
    wait_nodes()
    say(f"pbs site up in {time.monotonic() - t0:.1f} s")


def down() -> list[str]:
    stopped = []
    for name in ("bridge", "sshd", "index"):
        pid = _pid(name)
        if pid:  # its own session: the netns/nsenter wrappers and the daemon go together
            os.killpg(pid, signal.SIGTERM)
            stopped.append(f"{NAME}/{name}")
    if not PREFIX.joinpath("libexec/pbs_init.d").exists():
        return stopped
    for mom in MOMS:
        pid = daemon_pid(f"pbs_mom-{mom}")
        if pid:
            os.kill(pid, signal.SIGTERM)
            stopped.append(f"{NAME}/pbs_mom-{mom}")
    if any(daemon_pid(n) for n in ("pbs_comm", "pbs_server", "pbs_sched")) and _netns_exists(
        NETNS[HEAD]
    ):
        run_on(
            HEAD,
            [f"{PREFIX}/libexec/pbs_init.d", "stop"],
            env=_pbs_env(CONF),
            check=False,
            timeout=120,
        )
        stopped.append(f"{NAME}/pbs_server,pbs_sched,pbs_comm")
    return stopped


def status() -> bool:
    skipped = available()
    if skipped:
        print(skipped)
        return True
    ok = True
    rows = [(n, daemon_pid(n)) for n in LOCKS] + [
        ("sshd", _pid("sshd")),
        ("bridge", _pid("bridge")),
        ("index", _pid("index")),
    ]
    for name, pid in rows:
        ok &= pid is not None
        where = ADDR[HEAD] if not name.startswith("pbs_mom-") else ADDR[name.split("-", 1)[1]]
        if name == "bridge":
            where = f"127.0.0.1:{SSHD_PORT} -> {HEAD}:22"
        if name == "index":
            where = f"{HEAD}'s {INDEX_URL}"
        state = f"running  pid {pid}" if pid else "stopped"
        print(f"{NAME}/{name:<15} {state:<18} {where}")
    return ok
