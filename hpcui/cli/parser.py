"""The argparse tree of `hpcui`. Standard library only: `hpcui --help` must start fast.

The completion generator (`hpcui.cli.completion`) walks this same tree, so a new option
is completed in bash, zsh and fish without further work.

Over 500 lines: the whole argparse tree, one declarative block per command; splitting it would scatter the one place `hpcui --help` is read from.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from hpcui.request.fields import REQUEST_FIELDS
from hpcui.version import __version__

RESOURCE_PREFIX = "res_"
JSON_COMMANDS = (
    "env",
    "track",
    "submit",
    "run",
    "jobs",
    "show",
    "logs",
    "metrics",
    "result",
    "wait",
    "cancel",
    "hold",
    "release",
    "requeue",
    "update",
    "resubmit",
    "files",
    "download",
    "upload",
    "sync",
    "stop",
    "usage",
    "quota",
    "modules",
    "partitions",
    "free",
    "budget",
    "clusters",
    "profiles",
    "script",
    "ssh-config",
    "sweep",
)


def _checksum(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--checksum",
        action="store_true",
        help="compare by SHA-256 (not size and time) and verify every file after the copy",
    )


def _state_list(text: str) -> list[str]:
    """`--state running,pending` -> canonical JobState names; argparse turns errors into usage."""
    from hpcui.backends.states import JobState  # an Enum, no third-party imports

    names = [s.strip().upper() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in JobState.__members__]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown state {', '.join(bad) or text!r} (choose from {', '.join(JobState.__members__)})"
        )
    return names


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    parse.__name__ = getattr(kind, "__name__", "number")  # argparse names the type
    return parse


def _common() -> argparse.ArgumentParser:
    """Options every subcommand accepts after its name too (`hpcui jobs -c mn5`)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--cluster",
        "-c",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help="cluster from the config (default: the configured default)",
    )
    p.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    return p


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output (see docs/cli.md)")
    p.add_argument(
        "--json-schema", action="store_true", help="print the JSON schema of --json output and exit"
    )


def _resources(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("resources (validated against the cluster's profile)")
    for f in REQUEST_FIELDS:  # declared once, in hpcui.request.fields
        dest = RESOURCE_PREFIX + f.keyword
        if f.kind is None:
            g.add_argument(f.flag, dest=dest, action="store_const", const=True, help=f.help)
        elif f.repeatable:
            g.add_argument(f.flag, dest=dest, action="append", metavar=f.metavar, help=f.help)
        elif f.choices:
            g.add_argument(f.flag, dest=dest, choices=f.choices, help=f.help)
        else:
            g.add_argument(f.flag, dest=dest, type=f.kind, metavar=f.metavar, help=f.help)


def _estimate(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--estimate",
        action="store_true",
        help=f"when it would start, per partition, as the scheduler estimates it ({what})",
    )


def _outcome(p: argparse.ArgumentParser) -> None:
    _estimate(p, "nothing is submitted: sbatch --test-only")
    p.add_argument("--wait", action="store_true", help="show progress until the job ends")
    p.add_argument("--follow", "-f", action="store_true", help="stream the job's stdout live")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the job id")
    p.add_argument(
        "--timeout", type=_positive(float), metavar="S", help="give up waiting after S seconds"
    )


def _duration(text: str) -> float:
    """`30d`, `12h`, `1-00:00:00` -> seconds; argparse turns errors into usage."""
    from hpcui.common.units import parse_time  # `hpcui --help` imports argparse alone

    try:
        return float(parse_time(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _service(p: argparse.ArgumentParser, title: str) -> None:
    """What every web service in a job takes (jupyter, tensorboard)."""
    p.add_argument("--no-browser", action="store_true", help="print the URL, open nothing")
    p.add_argument("--local", type=_positive(int), metavar="N", help="the local port")
    p.add_argument(
        "--timeout", type=_positive(float), metavar="S", help="give up waiting after S seconds"
    )
    p.add_argument("--stop", action="store_true", help=f"cancel your running {title} jobs")
    _resources(p)
    _json(p)


def _new_cluster(p: argparse.ArgumentParser, *, named: bool) -> None:
    if named:
        p.add_argument("name", metavar="NAME", help="what hpcui calls the cluster (-c NAME)")
    else:
        p.add_argument("--name", help="what hpcui calls the cluster (asked if not given)")
    p.add_argument(
        "--host", help="login node ([user@]host[:port]), or a Host alias of your ~/.ssh/config"
    )
    p.add_argument(
        "--port", type=_positive(int), metavar="N", help="SSH port (default: ssh config, 22)"
    )
    p.add_argument("--user", help="user name on the cluster (default: ssh config, this user)")
    p.add_argument("--key", metavar="PATH", help="private key (default: ssh config, agent)")
    p.add_argument("--jump", metavar="HOST", help="jump host ([user@]host[:port])")
    p.add_argument("--ssh-config", metavar="PATH", help="read this ssh config (like ssh -F)")
    p.add_argument("--profile", help="built-in or user profile (default: detected)")
    p.add_argument(
        "--python", metavar="PATH", help="the cluster's python (default: one matching this one)"
    )
    p.add_argument(
        "--setup",
        action="append",
        metavar="LINE",
        help="a setup line (repeatable), e.g. 'module load python/3.11'",
    )
    p.add_argument("--account", help="account/project jobs are charged to")
    p.add_argument("--no-test", action="store_true", help="do not run the tiny test job")
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="no questions: accept the host key shown and write the table",
    )
    p.add_argument(
        "--config-file",
        metavar="PATH",
        help="the config to add to (default: HPCUI_CONFIG or the user config)",
    )
    _json(p)


#: options whose value is itself a directive that starts with a dash (`--extra
#: --begin=now+600`): argparse would take the value for an option of its own
DASHED_VALUES = frozenset({"--extra", "--sort"})  # `--sort -loss`: descending


def attach_dashed_values(argv: list[str]) -> list[str]:
    """`--extra --begin=now+600` as `--extra=--begin=now+600` (what argparse accepts),
    before a bare `--` or `exec` only: a remote command's words are never touched."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("--", "exec"):
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if word in DASHED_VALUES and nxt is not None and nxt.startswith("-"):
            out.append(f"{word}={nxt}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


@functools.cache
def shared_parser() -> argparse.ArgumentParser:
    """Built once per process: the agent parses every request with it (parsing does not
    change a parser)."""
    return build_parser()


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    p = argparse.ArgumentParser(
        prog="hpcui",
        description="Drive Slurm/PBS supercomputers from your laptop. With no command, opens the app.",
        epilog="Exit codes: 0 ok, 1 other error, 2 usage, 3 connection/auth, 4 scheduler "
        "rejected, 5 job failed, 6 gave up waiting, 130 interrupted.",
    )
    p.add_argument(
        "--cluster", "-c", metavar="NAME", help="cluster from the config (default: the default)"
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[common], **kw)

    s = add("submit", "submit MODULE:FUNCTION (your module travels with the job)")
    s.add_argument("function", metavar="MODULE:FUNCTION", help="e.g. train:main or ./train.py:main")
    s.add_argument("--args", metavar="JSON", default="[]", help="positional arguments: a JSON list")
    s.add_argument(
        "--kwargs", metavar="JSON", default="{}", help="keyword arguments: a JSON object"
    )
    _outcome(s)
    _json(s)
    _resources(s)

    s = add(
        "run",
        "run a plain Python script on the cluster (hpcui options go before SCRIPT, "
        "everything after it goes to the script)",
    )
    s.add_argument(
        "script", metavar="SCRIPT.py", help="a local file; its content travels with the job"
    )
    s.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="sys.argv[1:]")
    _outcome(s)
    _json(s)
    _resources(s)

    s = add(
        "sweep",
        "one call over many configurations, named and resumable: `sweep MODULE:FN|SCRIPT.py "
        "--grid lr=1e-3,1e-4 --name NAME` (the name is its jobs' too), then `sweep "
        "show|resume|cancel NAME`, `sweep list`",
    )
    s.add_argument(
        "target", metavar="MODULE:FN|SCRIPT.py|show|resume|cancel|list",
        help="what to run (a function gets each configuration as keywords, a script as "
        "--name=value options), or what to do with the sweep NAME",
    )  # fmt: skip
    s.add_argument("sweep_name", nargs="?", metavar="NAME", help="the sweep (show/resume/cancel)")
    s.add_argument(
        "--grid", action="append", metavar="NAME=V1,V2", default=[],
        help="a parameter's values (repeat: every combination); values read as JSON",
    )  # fmt: skip
    s.add_argument(
        "--configs", metavar="JSON|@FILE", help="the configurations as a JSON list of objects"
    )
    s.add_argument(
        "--random", metavar="JSON",
        help='random draws: \'{"lr": {"log": [1e-5, 1e-2]}, "bs": [16, 32], '
        '"drop": {"uniform": [0, 0.5]}, "n": 50}\' (a list: one of its values)',
    )  # fmt: skip
    s.add_argument("--seed", type=int, help="the random draws' seed (default 0)")
    s.add_argument(
        "--calls-per-task", type=_positive(int), metavar="K",
        help="run K configurations to an array task, one after another (short ones)",
    )  # fmt: skip
    s.add_argument("--csv", action="store_true", help="show: the table as CSV")
    s.add_argument("--sort", metavar="[-]COLUMN", help="show: by this column (-: descending)")
    s.add_argument(
        "--filter", metavar="QUERY",
        help="show: rows matching every word: COLUMN=TEXT, COLUMN>N, COLUMN<N or TEXT",
    )  # fmt: skip
    s.add_argument(
        "--no-metrics", action="store_true", help="show: skip reading each log for metrics"
    )
    s.add_argument(
        "--for-state", metavar="STATE", type=str.upper,
        help="resume: the resource options apply only to elements that ended so "
        "(e.g. --for-state OUT_OF_MEMORY --mem 16G); the others run as before",
    )  # fmt: skip
    _json(s)
    _resources(s)

    s = add("jobs", "your jobs in the queue (hpcui's unless --all), or the history")
    s.add_argument("--all", "-a", action="store_true", help="also jobs not submitted by hpcui")
    s.add_argument(
        "--history",
        type=_positive(float),
        metavar="DAYS",
        help="finished and running jobs of the last DAYS days (sacct) instead of the queue",
    )
    s.add_argument("--state", type=_state_list, metavar="S[,S]", help="only these states")
    s.add_argument(
        "--registry", action="store_true", help="jobs hpcui remembers locally (no network)"
    )
    s.add_argument(
        "--expand",
        action="store_true",
        help="one row per array task (arrays of 5 or more fold into one row by default)",
    )
    s.add_argument(
        "--all-users",
        action="store_true",
        help="every user's jobs, as squeue shows the partitions (with a USER column)",
    )
    _json(s)

    s = add("show", "one job: state, folder, tasks, exit code and efficiency")
    s.add_argument("job", metavar="JOB", help="job id (from `hpcui jobs`)")
    _json(s)

    s = add("logs", "a job's stdout (or stderr), all ranks unless --rank")
    s.add_argument("job", metavar="JOB")
    s.add_argument("--stderr", action="store_true", help="stderr instead of stdout")
    s.add_argument("--rank", type=int, metavar="N", help="only task/rank N")
    s.add_argument("--follow", "-f", action="store_true", help="keep reading until the job ends")
    s.add_argument(
        "--quiet-runtime",
        action="store_true",
        help="hide the runtime's own INFO lines (submitit's `Starting with JobEnvironment`...)",
    )
    s.add_argument(
        "--raw",
        action="store_true",
        help="the job's bytes as they are, escapes too (to a terminal they are dropped, "
        "colours kept)",
    )
    _json(s)

    s = add("metrics", "the numbers a job's log printed (loss, accuracy, ...) per step or epoch")
    s.add_argument("jobs", nargs="+", metavar="JOB", help="one or more jobs (to compare)")
    s.add_argument("--stderr", action="store_true", help="read stderr instead of stdout")
    s.add_argument("--rank", type=int, default=0, metavar="N", help="task/rank N (default 0)")
    s.add_argument(
        "--all-ranks",
        action="store_true",
        help="every rank of a multi-task job: rank 0 beside the others (--csv/--json: one "
        "series set per rank, `JOB rank N`)",
    )
    s.add_argument(
        "--pattern",
        metavar="REGEX",
        help="also a series from this regex's first group (a named group names it)",
    )
    s.add_argument(
        "--file",
        metavar="PATH",
        help="read a file the job's logger writes instead of its log: Lightning's CSVLogger "
        "metrics.csv (any CSV with a header) or JSON lines; relative to your home there",
    )
    s.add_argument("--csv", action="store_true", help="one CSV row per job and step")
    _json(s)

    s = add("result", "a job's return value (waits for the job to end)")
    s.add_argument("job", metavar="JOB")
    s.add_argument("--timeout", type=_positive(float), metavar="S", help="give up after S seconds")
    s.add_argument("--all-ranks", action="store_true", help="one value per task/rank")
    _json(s)

    s = add("wait", "wait until jobs end; say each end (--notify: on the desktop, else the bell)")
    s.add_argument("jobs", nargs="+", metavar="JOB")
    s.add_argument(
        "--notify",
        action="store_true",
        help="a desktop notification as each job ends (notify-send, osascript), else the bell",
    )
    s.add_argument("--timeout", type=_positive(float), metavar="S", help="give up after S seconds")
    _json(s)

    s = add("cancel", "cancel jobs (scancel/qdel)")
    s.add_argument("jobs", nargs="+", metavar="JOB")
    _json(s)

    for verb, text in (
        ("hold", "keep pending jobs from starting (until `hpcui release`)"),
        ("release", "let held jobs start"),
        ("requeue", "put running or ended batch jobs back in the queue (same id)"),
    ):
        s = add(verb, f"{text}; any job of yours, not only hpcui's")
        s.add_argument("jobs", nargs="+", metavar="JOB")
        _json(s)

    s = add("update", "change a job's time limit (scontrol update / qalter)")
    s.add_argument("job", metavar="JOB")
    s.add_argument(
        "--time", required=True, metavar="TIME", help="new limit: 2:00:00, 90m, 1-12:00:00"
    )
    _json(s)

    s = add(
        "resubmit",
        "submit any job's batch script again, from its working directory (--edit: change it "
        "in $EDITOR first)",
    )
    s.add_argument("job", metavar="JOB")
    s.add_argument("--edit", action="store_true", help="open the script in $VISUAL/$EDITOR")
    s.add_argument("--print", action="store_true", help="print the script; submit nothing")
    _json(s)

    s = add(
        "shell",
        "an interactive shell inside a running job (srun --overlap --pty), or with --new in a "
        "new allocation (salloc) that ends when the shell exits",
    )
    s.add_argument("job", nargs="?", metavar="JOB")
    s.add_argument("--node", metavar="NODE", help="this node of the job (default: its first)")
    s.add_argument(
        "--new",
        action="store_true",
        help="a new interactive allocation with the resources given (like salloc)",
    )
    _resources(s)

    s = add(
        "files",
        "a job's folder (hpcui's job folder, else its working directory): list it, or show a file",
    )
    s.add_argument("job", metavar="JOB")
    s.add_argument("path", nargs="?", metavar="PATH", help="inside the folder")
    _json(s)

    s = add(
        "download",
        "copy a file or folder of a job's folder here (only what changed; resumes a cut-off copy)",
    )
    s.add_argument("job", metavar="JOB")
    s.add_argument("path", metavar="PATH", help="inside the job's folder")
    s.add_argument(
        "dest",
        nargs="?",
        metavar="DEST",
        help="file or folder (default: .; a folder lands in DEST/NAME)",
    )
    _checksum(s)
    _json(s)

    s = add("upload", "copy a file or folder to a cluster (only what changed; resumes)")
    s.add_argument("cluster", metavar="CLUSTER")
    s.add_argument("local", metavar="LOCAL", help="file or folder here")
    s.add_argument(
        "remote",
        metavar="REMOTE",
        help="on the cluster, relative to your home there (a folder lands in REMOTE/NAME)",
    )
    _checksum(s)
    _json(s)

    s = add(
        "sync",
        "make a folder a copy of another, one way, as `rsync -a SRC/ DEST/` (never deletes)",
    )
    s.add_argument("src", metavar="SRC", help="CLUSTER:PATH or a local folder")
    s.add_argument("dest", metavar="DEST", help="a local folder or CLUSTER:PATH")
    _checksum(s)
    _json(s)

    s = add("stop", "ask a running job to stop gracefully (hpcui.distributed.stop_requested)")
    s.add_argument("job", metavar="JOB")
    _json(s)

    s = add("usage", "GPU and CPU use of a job: a look now (if it runs), history, verdicts")
    s.add_argument("job", metavar="JOB")
    _json(s)

    s = add("top", "live GPU/CPU use of a running job (or of your running jobs), like nvtop")
    s.add_argument("job", nargs="?", metavar="JOB", help="one job (default: your running jobs)")
    s.add_argument(
        "--interval", type=_positive(float), default=5.0, metavar="S", help="seconds between looks"
    )
    s.add_argument("--count", type=_positive(int), metavar="N", help="stop after N looks")

    s = add("quota", "disk quota (the site's tool, or df)")
    _json(s)

    s = add("modules", "loaded environment modules (or --avail, --search)")
    g = s.add_mutually_exclusive_group()
    g.add_argument(
        "--avail",
        nargs="?",
        const="",
        metavar="NAME",
        help="available modules, defaults marked (NAME: those whose name contains it; a "
        "hidden module shows when NAME is its full name)",
    )
    g.add_argument("--search", metavar="TERM", help="modules whose name contains TERM")
    s.add_argument("--hidden", action="store_true", help="with --avail: hidden modules too (H)")
    s.add_argument(
        "--setup",
        action="store_true",
        help="loaded after the cluster's `setup` lines: the modules your jobs run with",
    )
    _json(s)

    s = add("partitions", "partitions with free nodes and GPUs")
    _json(s)

    s = add("free", "free CPUs and GPUs per partition now (--nodes: per node), from sinfo")
    s.add_argument("--nodes", action="store_true", help="one line per node and partition")
    _json(s)

    s = add(
        "budget",
        "your fair share, your pending jobs' priority (sshare, sprio) and the project's "
        "allocation left (the site's tool)",
    )
    _json(s)

    s = add("clusters", "configured clusters (--check: connection and remote Python)")
    s.add_argument("names", nargs="*", metavar="NAME", help="only these (default: all)")
    s.add_argument("--check", action="store_true", help="connect and check the remote Python")
    s.add_argument("--names", dest="names_only", action="store_true", help=argparse.SUPPRESS)
    _json(s)

    s = add("profiles", "site profiles (built-in and your own), or one profile's rules")
    s.add_argument("name", nargs="?", metavar="NAME")
    _json(s)

    s = add("script", "print the batch script a request would submit (nothing is submitted)")
    s.add_argument("--array", type=_positive(int), metavar="N", help="as a job array of N")
    _estimate(s, "after the script, on stderr; with --json in `estimates`")
    _json(s)
    _resources(s)

    s = add(
        "clean",
        "remove the cluster folders of ended jobs whose results were fetched (files and "
        "bytes freed are reported; pending and running jobs are never touched)",
    )
    s.add_argument(
        "--older-than",
        metavar="TIME",
        type=_duration,
        help="also remove ended jobs submitted before TIME ago (e.g. 30d), fetched or not",
    )
    s.add_argument("--dry-run", action="store_true", help="count what would go; remove nothing")
    _json(s)

    s = add("env", "the environments env= built on a cluster: list (size, inodes), show, rm, build")
    s.add_argument("action", choices=("list", "show", "rm", "build"), nargs="?", default="list")
    s.add_argument("items", nargs="*", metavar="KEY|REQ", help="keys (show, rm); requirements "
                   "or a requirements file (build)")  # fmt: skip
    _json(s)

    s = add(
        "track",
        "the experiment trackers of track= jobs, mirrored here: list, run (relay until they "
        "end), sync (a pass now, and W&B's upload), stop (relay a job no more)",
    )
    s.add_argument("action", choices=("list", "run", "sync", "stop"), nargs="?", default="list")
    s.add_argument("jobs", nargs="*", metavar="JOB", help="the jobs (sync, stop; default: all)")
    s.add_argument("--interval", type=_positive(float), metavar="S",
                   help="run: seconds between passes (default 30)")  # fmt: skip
    _json(s)

    s = add("init", "add your first (or another) cluster: asks, connects, detects, tests")
    _new_cluster(s, named=False)
    s = add(
        "add",
        "add a cluster without questions: connects, detects the scheduler and profile, "
        "finds a matching Python, runs a test job, appends its table to the config",
    )
    _new_cluster(s, named=True)

    s = add("trust", "accept a cluster's SSH host key after checking its fingerprint")
    s.add_argument("name", nargs="?", metavar="NAME", help="cluster (default: the default)")
    s.add_argument(
        "--yes", action="store_true", help="accept without asking (fingerprint still printed)"
    )

    s = add(
        "exec",
        "run a command on the login node: one argument is a shell command line "
        "(`hpcui exec 'squeue --me | head'`), several a program and its arguments",
    )
    s.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD")

    s = add(
        "forward",
        "a port of a running job's node on this machine (127.0.0.1 only), over the "
        "cluster's SSH connection, until the job ends",
    )
    s.add_argument("job", nargs="?", metavar="JOB", help="the job (ID or CLUSTER:ID)")
    s.add_argument("port", nargs="?", type=_positive(int), metavar="PORT", help="its port")
    s.add_argument(
        "--local",
        type=_positive(int),
        metavar="N",
        help="the local port (default: PORT when free here, else a free one)",
    )
    s.add_argument("--list", action="store_true", help="the forwards held (by the agent)")
    s.add_argument(
        "--stop", nargs="?", const="all", metavar="JOB", help="end a job's forwards (or all)"
    )
    _json(s)

    s = add(
        "jupyter",
        "JupyterLab in a job on a compute node, forwarded here: prints the local URL with "
        "its token and opens the browser",
    )
    s.add_argument("--dir", metavar="PATH", help="the folder it opens (default: your home)")
    _service(s, "Jupyter")

    s = add(
        "tensorboard",
        "TensorBoard in a small job over a job's folder or --logdir, forwarded here: prints "
        "the local URL and opens the browser",
    )
    s.add_argument("job", nargs="?", metavar="JOB", help="the job whose folder it reads")
    s.add_argument("--logdir", metavar="PATH", help="the folder it reads (instead of JOB)")
    s.add_argument("--mirror", action="store_true", help="TensorBoard on this machine over a "
                   "track= job's mirror, relayed as it grows (no job, no forward)")  # fmt: skip
    _service(s, "TensorBoard")

    s = add(
        "proxy",
        "ssh's ProxyCommand to a running job's node: port 22 there over hpcui's login (one "
        "2FA for every ssh, scp, rsync, git and VS Code connection; see `hpcui ssh-config`)",
    )
    s.add_argument("cluster_or_job", metavar="CLUSTER", help="the cluster (or CLUSTER:JOB)")
    s.add_argument("job", nargs="?", metavar="JOB")
    s.add_argument("--port", type=_positive(int), default=22, metavar="N", help="default 22")
    s.add_argument(
        "--fdpass", action="store_true", help="hand ssh the connection (ProxyUseFdpass yes)"
    )

    s = add(
        "ssh-config",
        "ssh Host entries for your running jobs' nodes (hpcui-CLUSTER-JOB): ssh, scp, rsync, "
        "git and VS Code reach them through hpcui's login; --install keeps them current",
    )
    s.add_argument(
        "--install",
        action="store_true",
        help="write them to ~/.ssh/hpcui/config, included once from ~/.ssh/config (backed up)",
    )
    _json(s)

    s = add(
        "code",
        "open VS Code (Remote-SSH) on a running job's node, in its folder; --new first "
        "submits a job that holds a node until you cancel it or its time limit",
    )
    s.add_argument("job", nargs="?", metavar="JOB")
    s.add_argument("--new", action="store_true", help="a new job with the resources given")
    s.add_argument("--dry-run", action="store_true", help="print the VS Code command only")
    s.add_argument(
        "--timeout",
        type=_positive(float),
        default=1800.0,
        metavar="S",
        help="--new: give up waiting for the start after S seconds (default 1800)",
    )
    _resources(s)

    s = add(
        "mcp",
        "an MCP server on stdio for AI agents: hpcui's verbs as tools, read-only unless the "
        "config's [mcp] allow names more (docs/mcp.md)",
    )

    s = add("agent", "the per-user agent that keeps one connection per cluster (docs/cli.md)")
    s.add_argument("action", choices=("status", "stop"), help="show it, or stop it now")
    s.add_argument(
        "--all", action="store_true", help="stop: every agent of yours (any config or version)"
    )
    _json(s)

    s = add("serve", "serve the app to a web browser on localhost (textual-serve)")
    s.add_argument(
        "--port", type=_positive(int), default=8000, metavar="N", help="TCP port (default 8000)"
    )
    s.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )

    s = add("completion", "print a shell completion script")
    s.add_argument("shell", choices=("bash", "zsh", "fish"))
    return p
