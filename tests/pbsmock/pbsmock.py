#!/usr/bin/env python3
"""A PBS Pro 19 stand-in for the dev cluster: qsub/qstat/qselect/qdel/qhold/qrls/qalter/
qrerun/pbs_tmrsh over Slurm.

Real PBS Pro cannot run on the test machine, so this mock speaks PBS Pro's command-line
language and REPLAYS ITS OUTPUT SHAPES: ``qstat -f -F json`` is written in the layout of
the verbatim capture in tests/fixtures/pbs-pro-19.0/qstat_f_json_running.json (four-space
indent, ``"key":value``, the same attribute names), with the job's own values; ids are
``<seq>.pbsmock`` and ``<seq>[<i>].pbsmock``; error lines and exit statuses are PBS's
(``qstat: Unknown Job Id ...`` 153, ``... Job has finished, use -x ...`` 35). Jobs really
run: qsub hands each one to the dev cluster's Slurm (sbatch), and ``run`` starts the
job script there with PBS's environment (PBS_JOBID, PBS_ARRAY_INDEX, PBS_ARRAY_ID,
PBS_NODEFILE, PBS_O_WORKDIR, ...). A ``select=N`` job gets N real Slurm nodes of the dev
cluster (``sbatch --nodes=N``): its node file names their hosts (the first is where the
script runs), and ``pbs_tmrsh HOST CMD`` starts CMD on that host inside the allocation
(``srun --overlap``), with no Slurm variables, as PBS's TM spawn would.

PBSMOCK_HISTORY=0 makes the server keep no history (finished jobs vanish, as on PBS Pro
with job_history_enable=false). State: ``$PBSMOCK_HOME`` (default ~/pbsmock/state).
Standard library only; called as ``pbsmock.py COMMAND ARGS...`` by tiny stubs in bin/.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SERVER = "pbsmock"
VERSION = "19.0.0"
STATE = Path(os.environ.get("PBSMOCK_HOME") or Path.home() / "pbsmock" / "state")
HISTORY = os.environ.get("PBSMOCK_HISTORY", "1") != "0"
HERE = Path(__file__).resolve()


def ctime(t: float) -> str:
    return time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(t))


def hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


# --- state -------------------------------------------------------------------------------


def next_seq() -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "seq", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        seq = int(fh.read().strip() or "1000") + 1
        fh.seek(0)
        fh.truncate()
        fh.write(str(seq))
    return seq


def load(seq: int) -> dict | None:
    try:
        return json.loads((STATE / f"{seq}.json").read_text())
    except (OSError, ValueError):
        return None


def element_file(seq: int, index: int | None, kind: str) -> Path:
    return STATE / f"{seq}_{'x' if index is None else index}.{kind}"


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# --- qsub ---------------------------------------------------------------------------------

_OPT_WITH_ARG = set("NlPqJjoeSvWAa")


def parse_opts(words: list[str], opts: dict) -> list[str]:
    """PBS options (getopt style) into `opts`; returns the operands."""
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or w == "-":
            return words[i:]
        flag = w[1:2]
        if flag in _OPT_WITH_ARG:
            value = w[2:] or words[i + 1]
            i += 1 if w[2:] else 2
            if flag == "l":
                for part in value.split(","):
                    key, _, val = part.partition("=")
                    opts.setdefault("l", {})[key] = val
            elif flag == "v":
                for part in value.split(","):
                    key, _, val = part.partition("=")
                    opts.setdefault("v", {})[key] = val
            elif flag == "W":
                key, _, val = value.partition("=")
                opts.setdefault("W", {})[key] = val
            else:
                opts[flag] = value
        else:
            opts[flag] = True
            i += 1
    return []


def script_directives(text: str) -> list[str]:
    """`#PBS` words up to the first command line, as PBS reads them."""
    words: list[str] = []
    for line in text.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#PBS"):
            words += shlex.split(stripped[4:])
        elif stripped and not stripped.startswith("#"):
            break
    return words


def parse_select(select: str) -> tuple[int, dict[str, str]]:
    count, *parts = select.split(":")
    if not count.isdigit():
        parts, count = [count, *parts], "1"
    return int(count), dict(p.split("=", 1) for p in parts if "=" in p)


def parse_range(spec: str) -> list[int]:
    m = re.fullmatch(r"(\d+)-(\d+)(?::(\d+))?", spec)
    if m is None or int(m[1]) >= int(m[2]):
        raise SystemExit(f"qsub: illegal -J value\n{spec}")
    return list(range(int(m[1]), int(m[2]) + 1, int(m[3] or 1)))


def qsub(args: list[str]) -> int:
    opts: dict = {}
    operands = parse_opts(args, opts)
    if not operands:
        print("usage: qsub [-J X-Y[:Z]] [-l resource_list] ... script", file=sys.stderr)
        return 2
    script_path = Path(operands[0]).resolve()
    text = script_path.read_text()
    merged: dict = {}
    parse_opts(script_directives(text), merged)
    for key, value in opts.items():  # the command line wins over directives
        if isinstance(value, dict):
            merged.setdefault(key, {}).update(value)
        else:
            merged[key] = value
    resources = merged.get("l", {})
    nodes, chunk = parse_select(resources.get("select", "1:ncpus=1"))
    indices = parse_range(merged["J"]) if "J" in merged else None
    seq = next_seq()
    now = time.time()
    job = {
        "seq": seq,
        "name": merged.get("N", script_path.name)[:236],
        "owner": f"{os.environ.get('USER') or os.getlogin()}@{socket.gethostname()}",
        "queue": merged.get("q", "workq"),
        "project": merged.get("P", "_pbs_project_default"),
        "nodes": nodes,
        "chunk": chunk,
        "resources": resources,
        "indices": indices,
        "max_run": merged.get("W", {}).get("max_run_subjobs"),
        "variables": {
            "PBS_O_HOME": str(Path.home()),
            "PBS_O_WORKDIR": os.getcwd(),
            "PBS_O_QUEUE": merged.get("q", "workq"),
            "PBS_O_HOST": socket.gethostname(),
            **merged.get("v", {}),
        },
        "join": merged.get("j", "n"),
        "output": merged.get("o", f"{os.getcwd()}/{script_path.name}.o{seq}"),
        "error": merged.get("e", f"{os.getcwd()}/{script_path.name}.e{seq}"),
        "ctime": now,
        "submit_args": " ".join(shlex.quote(a) for a in args),
    }
    (STATE / f"{seq}.sh").write_text(text)
    write_atomic(STATE / f"{seq}.json", json.dumps(job))
    sbatch = ["sbatch", "--parsable", f"--job-name=pbsmock-{seq}", "--cpus-per-task=1"]
    sbatch += [f"--nodes={nodes}", "--ntasks-per-node=1"]  # select=N: N real hosts
    sbatch += [
        f"--output={STATE}/{seq}_%a.slurm.out" if indices else f"--output={STATE}/{seq}.slurm.out"
    ]
    if "walltime" in resources:
        sbatch.append(f"--time={walltime_minutes(resources['walltime'])}")
    if merged.get("h"):  # qsub -h: a user hold from the start
        sbatch.append("--hold")
    depend = merged.get("W", {}).get("depend", "")
    if depend:  # -W depend=afterok:ID[:ID]: the Slurm jobs behind those ids
        kind, *wids = depend.split(":")
        deps = [load(int(m[1])) if (m := _ID.fullmatch(w)) else None for w in wids]
        if kind != "afterok" or not wids or None in deps:
            (STATE / f"{seq}.json").unlink()
            print(f"qsub: illegal -W value: depend={depend}", file=sys.stderr)
            return 2
        sbatch.append(f"--dependency=afterok:{':'.join(d['slurm_id'] for d in deps)}")  # type: ignore[index]
    if indices:
        step = indices[1] - indices[0] if len(indices) > 1 else 1
        spec = f"{indices[0]}-{indices[-1]}" + (f":{step}" if step > 1 else "")
        if job["max_run"]:
            spec += f"%{job['max_run']}"
        sbatch.append(f"--array={spec}")
    sbatch += ["--wrap", f"exec {shlex.quote(sys.executable)} {shlex.quote(str(HERE))} run {seq}"]
    proc = subprocess.run(sbatch, capture_output=True, text=True)
    if proc.returncode != 0:
        (STATE / f"{seq}.json").unlink()
        print(f"qsub: {proc.stderr.strip()}", file=sys.stderr)
        return 1
    job["slurm_id"] = proc.stdout.strip().split(";")[0]
    write_atomic(STATE / f"{seq}.json", json.dumps(job))
    if merged.get("h"):
        (STATE / f"{seq}.held").write_text(str(time.time()))
    print(f"{seq}[].{SERVER}" if indices else f"{seq}.{SERVER}")
    return 0


# --- run: the job on the Slurm node, with PBS's environment ------------------------------------


def run(args: list[str]) -> int:
    seq = int(args[0])
    job = load(seq)
    assert job is not None, f"no job {seq}"
    index = int(os.environ["SLURM_ARRAY_TASK_ID"]) if job["indices"] is not None else None
    jid = f"{seq}[{index}].{SERVER}" if index is not None else f"{seq}.{SERVER}"
    if element_file(seq, index, "deleted").exists():
        return 0
    host = socket.gethostname()
    per_chunk = int(job["chunk"].get("mpiprocs", job["chunk"].get("ncpus", 1)))
    allocated = subprocess.run(
        ["scontrol", "show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", host)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split() or [host]
    hosts = [host] + [h for h in allocated if h != host]
    nodefile = element_file(seq, index, "nodes")
    nodefile.write_text("".join(f"{h}\n" * per_chunk for h in hosts))
    env = dict(os.environ)
    for key in [k for k in env if k.startswith("SLURM_")]:
        del env[key]  # the job must not look like a Slurm job to the code under test
    env["PBSMOCK_SLURM_JOB"] = os.environ.get("SLURM_JOB_ID", "")  # for pbs_tmrsh only
    env.update(job["variables"])
    env.update(
        PBS_JOBID=jid,
        PBS_JOBNAME=job["name"],
        PBS_QUEUE=job["queue"],
        PBS_NODEFILE=str(nodefile),
        PBS_ENVIRONMENT="PBS_BATCH",
        PBS_JOBDIR=str(Path.home()),
    )
    if index is not None:
        env.update(PBS_ARRAY_INDEX=str(index), PBS_ARRAY_ID=f"{seq}[].{SERVER}")
    out_path = job["output"].replace("^array_index^", str(index))
    out = open(out_path, "ab")
    err = (
        out
        if job["join"] == "oe"
        else open(job["error"].replace("^array_index^", str(index)), "ab")
    )
    element_file(seq, index, "rerun").unlink(missing_ok=True)  # this run is the rerun
    write_atomic(
        element_file(seq, index, "start"),
        json.dumps({"host": host, "hosts": hosts, "stime": time.time()}),
    )
    child = subprocess.Popen(
        ["/bin/bash", str(STATE / f"{seq}.sh")],
        cwd=str(Path.home()),
        env=env,
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )

    def killed(signum, frame):  # qdel of a running job: SIGTERM, then SIGKILL (kill_delay)
        # Recorded first: Slurm SIGKILLs this wrapper KillWait (2 s here) after its SIGTERM.
        # A qrerun is no end: the job runs again (Slurm's requeue), so nothing is recorded.
        if not element_file(seq, index, "rerun").exists():
            write_atomic(element_file(seq, index, "exit"), str(256 + signal.SIGTERM))
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        os._exit(0)

    signal.signal(signal.SIGTERM, killed)
    rc = child.wait()
    # Slurm's requeue may kill the script before this wrapper's SIGTERM handler runs: that
    # end is no end either (CI once saw a rerun job reported finished by this race).
    if not element_file(seq, index, "rerun").exists():
        write_atomic(element_file(seq, index, "exit"), str(256 - rc if rc < 0 else rc))
    return 0


# --- status ----------------------------------------------------------------------------------


def element_state(seq: int, index: int | None) -> tuple[str, dict]:
    """(letter, facts) of one job or subjob from the files `run` and `qdel` leave."""
    exit_text = read_text(element_file(seq, index, "exit"))
    start = read_text(element_file(seq, index, "start"))
    deleted = read_text(element_file(seq, index, "deleted"))
    facts: dict = {"start": json.loads(start) if start else None}
    if exit_text is not None:
        facts["exit"] = int(exit_text)
        facts["end"] = element_file(seq, index, "exit").stat().st_mtime
        return ("X" if index is not None else "F"), facts
    if deleted is not None:
        if start is None:
            facts["end"] = float(deleted)
            return ("X" if index is not None else "F"), facts  # deleted while queued
        if time.time() - float(deleted) < 30:
            return "E", facts
        facts["exit"], facts["end"] = 256 + signal.SIGKILL, float(deleted)  # killed hard
        return ("X" if index is not None else "F"), facts
    if not start and held(seq):
        return "H", facts
    return ("R" if start else "Q"), facts


def held(seq: int) -> bool:
    return (STATE / f"{seq}.held").exists()


def attrs_for(job: dict, index: int | None, letter: str, facts: dict) -> dict:
    """One job's qstat -f attributes, named and formatted as PBS Pro 19 prints them."""
    seq, now = job["seq"], time.time()
    host = socket.gethostname()
    chunk = job["chunk"]
    ncpus = int(chunk.get("ncpus", 1))
    res: dict = {
        "mpiprocs": int(chunk.get("mpiprocs", 1)) * job["nodes"],
        "ncpus": ncpus * job["nodes"],
        "nodect": job["nodes"],
        "place": job["resources"].get("place", "free"),
        "select": job["resources"].get("select", "1:ncpus=1"),
    }
    if "ngpus" in chunk:
        res["ngpus"] = int(chunk["ngpus"]) * job["nodes"]
    if "mem" in chunk:
        res["mem"] = f"{int(chunk['mem'].rstrip('mb')) * job['nodes']}mb"
    if "walltime" in job["resources"]:
        res["walltime"] = job["resources"]["walltime"]
    a: dict = {
        "Job_Name": job["name"],
        "Job_Owner": job["owner"],
    }
    start = facts.get("start")
    if letter in ("F", "X") and start:
        a["resources_used"] = {
            "cpupercent": 0,
            "cput": "00:00:00",
            "mem": "0kb",
            "ncpus": ncpus * job["nodes"],
            "vmem": "0kb",
            "walltime": hms(facts["end"] - start["stime"]),
        }
    elif letter in ("R", "E") and start:
        a["resources_used"] = {
            "cpupercent": 0,
            "cput": "00:00:00",
            "mem": "0kb",
            "ncpus": ncpus * job["nodes"],
            "vmem": "0kb",
            "walltime": hms(now - start["stime"]),
        }
    a["job_state"] = letter
    a["queue"] = job["queue"]
    a["server"] = SERVER
    a["Checkpoint"] = "u"
    a["ctime"] = ctime(job["ctime"])
    a["Error_Path"] = f"{host}:{job['error']}"
    if start:
        hosts = start.get("hosts") or [start["host"]]
        a["exec_host"] = "+".join(f"{h}/0*{ncpus}" for h in hosts)
        a["exec_vnode"] = "+".join(f"({h}:ncpus={ncpus})" for h in hosts)
    a["Hold_Types"] = "u" if letter == "H" else "n"
    a["Join_Path"] = job["join"]
    a["Keep_Files"] = "n"
    a["Mail_Points"] = "a"
    a["mtime"] = ctime(facts.get("end") or (start or {}).get("stime") or job["ctime"])
    a["Output_Path"] = f"{host}:{job['output']}"
    a["Priority"] = 0
    a["qtime"] = ctime(job["ctime"])
    a["Rerunable"] = "True"
    a["Resource_List"] = res
    if start:
        a["stime"] = ctime(start["stime"])
    if letter in ("F", "X"):
        a["obittime"] = ctime(facts["end"])
    a["Shell_Path_List"] = "/bin/bash"
    a["substate"] = {"Q": 10, "H": 20, "R": 42, "E": 51, "F": 92, "X": 92, "B": 70}[letter]
    a["Variable_List"] = {k: v for k, v in job["variables"].items()}
    if letter == "Q":
        a["comment"] = "Not Running: Insufficient amount of resource: ncpus "
    elif start:
        a["comment"] = f"Job run at {ctime(start['stime'])} on ({start['host']}:ncpus={ncpus})"
    if "exit" in facts:
        a["comment"] = f"Job run at {ctime((start or {}).get('stime', job['ctime']))} and finished"
        a["Exit_status"] = facts["exit"]
    elif letter == "F":
        a["comment"] = "Job deleted"
    a["etime"] = ctime(job["ctime"])
    a["run_count"] = 1 if start else 0
    a["eligible_time"] = "00:00:00"
    if index is not None:
        a["array_id"] = f"{seq}[].{SERVER}"
        a["array_index"] = index
    a["Submit_arguments"] = job["submit_args"]
    a["project"] = job["project"]
    a["Submit_Host"] = host
    return a


def parent_attrs(job: dict, states: dict[int, str]) -> tuple[str, dict]:
    """An array parent: B once a subjob began, F when all are over (array_* attributes)."""
    letters = list(states.values())
    if all(s == "X" for s in letters):
        letter = "F"
    elif any(s in ("R", "E", "X") for s in letters):
        letter = "B"
    else:
        letter = "Q"
    facts: dict = {"start": None}
    if letter == "F":
        facts["end"] = max(element_state(job["seq"], i)[1]["end"] for i in states)
    a = attrs_for(job, None, letter, facts)
    if letter != "Q":
        a.pop("comment", None)
    a["array"] = "True"
    a["array_indices_submitted"] = _range_text(job["indices"])
    a["array_state_count"] = (
        f"Queued:{letters.count('Q')} Running:{letters.count('R')} "
        f"Exiting:{letters.count('E')} Expired:{letters.count('X')} "
    )
    remaining = [i for i, s in states.items() if s == "Q"]
    if remaining:
        a["array_indices_remaining"] = _range_text(remaining)
    return letter, a


def _range_text(indices: list[int]) -> str:
    if len(indices) == 1:
        return f"{indices[0]}-{indices[0] + 1}:2"
    step = indices[1] - indices[0]
    return f"{indices[0]}-{indices[-1]}" + (f":{step}" if step > 1 else "")


def all_seqs() -> list[int]:
    return sorted(int(p.stem) for p in STATE.glob("*.json") if p.stem.isdigit())


def job_records(seq: int, with_subjobs: bool) -> list[tuple[str, str, dict]]:
    """(id, letter, attrs) for a job: the parent first, then its subjobs with -t."""
    job = load(seq)
    if job is None:
        return []
    if job["indices"] is None:
        letter, facts = element_state(seq, None)
        return [(f"{seq}.{SERVER}", letter, attrs_for(job, None, letter, facts))]
    states = {i: element_state(seq, i) for i in job["indices"]}
    letter, a = parent_attrs(job, {i: s for i, (s, _) in states.items()})
    out = [(f"{seq}[].{SERVER}", letter, a)]
    if with_subjobs:
        for i, (sub_letter, facts) in states.items():
            out.append((f"{seq}[{i}].{SERVER}", sub_letter, attrs_for(job, i, sub_letter, facts)))
    return out


_ID = re.compile(r"(\d+)(?:\[(\d*)\])?(?:\.(\S+))?")


def select_records(wid: str, subjobs: bool, explicit: bool) -> list[tuple[str, str, dict]]:
    """What qstat shows for one id: a plain job, an array (`123[]`, with -t its subjobs)
    or one subjob (`123[4]`). Listing all jobs (no ids) shows arrays by their parent."""
    m = _ID.fullmatch(wid)
    job = load(int(m[1])) if m else None
    if job is None:
        return []
    is_array = job["indices"] is not None
    if not is_array:
        return job_records(job["seq"], False) if m[2] is None else []
    if m[2] is None and explicit:
        return []  # PBS needs the brackets to find an array
    records = job_records(job["seq"], subjobs or bool(m[2]))
    if m[2]:
        return [r for r in records if r[0] == f"{m[1]}[{m[2]}].{SERVER}"]
    return records


#: the mock's queues; jobs of any other queue name are counted under their own name
QUEUES = ("workq",)


def qstat_queues() -> int:
    """``qstat -Q`` in PBS Pro's layout (as the quoted outputs in
    tests/fixtures/pbs-constructed), with the mock's job counts per queue."""
    counts: dict[str, dict[str, int]] = {q: {} for q in QUEUES}
    for seq in all_seqs():
        job = load(seq)
        if job is None:
            continue
        (_, letter, _), *_ = job_records(seq, False)
        per = counts.setdefault(job["queue"], {})
        per[letter] = per.get(letter, 0) + 1
    print("Queue              Max   Tot Ena Str   Que   Run   Hld   Wat   Trn   Ext Type")
    print("---------------- ----- ----- --- --- ----- ----- ----- ----- ----- ----- ----")
    for name, per in counts.items():
        live = {k: per.get(k, 0) for k in "QRHWTE"}
        live["R"] += per.get("B", 0)  # an array with a begun subjob counts as running
        print(
            f"{name:<16} {0:>5} {sum(live.values()):>5} yes yes {live['Q']:>5} {live['R']:>5} "
            f"{live['H']:>5} {live['W']:>5} {live['T']:>5} {live['E']:>5} Exec"
        )
    return 0


def qstat(args: list[str]) -> int:
    if args[:1] == ["--version"]:
        print(f"pbs_version = {VERSION}")
        return 0
    if args == ["-Q"]:
        return qstat_queues()
    flags, ids, i = set(), [], 0
    while i < len(args):
        a = args[i]
        if a == "-F":
            if args[i + 1].lower() != "json":
                print("qstat: only -F json is mocked", file=sys.stderr)
                return 2
            flags.add("json")
            i += 2
            continue
        if a.startswith("-"):
            flags.update(a[1:])
        else:
            ids.append(a)
        i += 1
    if not {"f", "json"} <= flags:
        print("pbsmock: only `qstat [-x] [-t] -f -F json [ids]` is mocked", file=sys.stderr)
        return 2
    history, subjobs = "x" in flags, "t" in flags
    rc = 0
    found: dict[str, dict] = {}
    for wid in ids or [f"{s}.{SERVER}" for s in all_seqs()]:
        records = select_records(wid, subjobs, explicit=bool(ids))
        finished = bool(records) and records[0][1] == "F"
        if finished and not HISTORY:
            records = []  # no history: the server forgot finished jobs
        if not records:
            if ids:
                print(f"qstat: Unknown Job Id {wid}", file=sys.stderr)
                rc = 153
            continue
        if finished and not history:
            if ids:
                msg = "Job has finished, use -x or -H to obtain historical job information"
                print(f"qstat: {wid} {msg}", file=sys.stderr)
                rc = 35
            continue
        found.update((rid, a) for rid, _, a in records)
    doc: dict = {"timestamp": int(time.time()), "pbs_version": VERSION, "pbs_server": SERVER}
    if found:
        doc["Jobs"] = found
    print(json.dumps(doc, indent=4, separators=(",", ":")))
    return rc


def qselect(args: list[str]) -> int:
    history = "-x" in args
    for seq in all_seqs():
        records = job_records(seq, False)
        if not records:
            continue
        rid, letter, _ = records[0]
        if letter == "F" and not (history and HISTORY):
            continue
        print(rid)
    return 0


def qdel(args: list[str]) -> int:
    rc = 0
    for wid in [a for a in args if not a.startswith("-")]:
        m = _ID.fullmatch(wid)
        job = load(int(m[1])) if m else None
        if job is None:
            print(f"qdel: Unknown Job Id {wid}", file=sys.stderr)
            rc = 153
            continue
        seq = job["seq"]
        if m[2]:
            targets = [(int(m[2]), f"{job['slurm_id']}_{m[2]}")]
        elif job["indices"] is not None:
            targets = [(i, f"{job['slurm_id']}_{i}") for i in job["indices"]]
        else:
            targets = [(None, job["slurm_id"])]
        live = [(i, sid) for i, sid in targets if element_state(seq, i)[0] not in ("F", "X")]
        if not live:
            print(f"qdel: Job has finished {wid}", file=sys.stderr)
            rc = 35
            continue
        for i, _ in live:
            write_atomic(element_file(seq, i, "deleted"), str(time.time()))
        subprocess.run(["scancel", *(sid for _, sid in live)], check=False)
    return rc


def walltime_minutes(walltime: str) -> int:
    """PBS `HH:MM:SS` as Slurm's whole minutes (rounded up, at least 1)."""
    h, m, s = ([*walltime.split(":"), "0", "0"])[:3]
    return max(1, int(h) * 60 + int(m) + (1 if int(s) else 0))


def _one_job(tool: str, wid: str) -> dict | None:
    m = _ID.fullmatch(wid)
    job = load(int(m[1])) if m else None
    if job is None:
        print(f"{tool}: Unknown Job Id {wid}", file=sys.stderr)
    return job


def _each_job(tool: str, args: list[str], states: tuple[str, ...], act) -> int:  # type: ignore[no-untyped-def]
    """`act(job)` for each id of `args` whose job is in one of `states` (empty: any); PBS's
    error line and exit status for an unknown id or a job in another state."""
    rc = 0
    for wid in [a for a in args if not a.startswith("-")]:
        job = _one_job(tool, wid)
        if job is None:
            rc = 153
            continue
        if states and element_state(job["seq"], None)[0] not in states:
            print(f"{tool}: Request invalid for state of job {wid}", file=sys.stderr)
            rc = 168
            continue
        act(job)
    return rc


def qhold(args: list[str]) -> int:
    """PBS Pro: a user hold on a queued job (`H`); a running job is refused."""

    def hold(job: dict) -> None:
        (STATE / f"{job['seq']}.held").write_text(str(time.time()))
        subprocess.run(["scontrol", "hold", job["slurm_id"]], check=False)

    return _each_job("qhold", args, ("Q", "H"), hold)


def qrls(args: list[str]) -> int:
    def release(job: dict) -> None:
        (STATE / f"{job['seq']}.held").unlink(missing_ok=True)
        subprocess.run(["scontrol", "release", job["slurm_id"]], check=False)

    return _each_job("qrls", args, (), release)


def qalter(args: list[str]) -> int:
    """`qalter -l walltime=HH:MM:SS ID`: the job's Resource_List and its Slurm limit."""
    if len(args) != 3 or args[0] != "-l" or not args[1].startswith("walltime="):
        print("pbsmock: only `qalter -l walltime=HH:MM:SS ID` is mocked", file=sys.stderr)
        return 2
    job = _one_job("qalter", args[2])
    if job is None:
        return 153
    walltime = args[1].split("=", 1)[1]
    if element_state(job["seq"], None)[0] in ("F", "X"):
        print(f"qalter: Request invalid for state of job {args[2]}", file=sys.stderr)
        return 168
    job["resources"]["walltime"] = walltime
    write_atomic(STATE / f"{job['seq']}.json", json.dumps(job))
    minutes = walltime_minutes(walltime)
    subprocess.run(
        ["scontrol", "update", f"JobId={job['slurm_id']}", f"TimeLimit={minutes}"], check=False
    )
    return 0


def qrerun(args: list[str]) -> int:
    """A running job goes back to the queue (PBS Pro: a queued one is refused)."""

    def rerun(job: dict) -> None:
        write_atomic(element_file(job["seq"], None, "rerun"), str(time.time()))
        element_file(job["seq"], None, "start").unlink(missing_ok=True)
        subprocess.run(["scontrol", "requeue", job["slurm_id"]], check=False)

    return _each_job("qrerun", args, ("R",), rerun)


def pbs_tmrsh(args: list[str]) -> int:
    """`pbs_tmrsh HOST CMD...`: PBS Pro's TM-based rsh: CMD runs on HOST, attached to the
    job (here: a step of the job's Slurm allocation on that node), without Slurm's
    variables, so the code under test sees a PBS job there too."""
    host, cmd = args[0], args[1:]
    slurm_job = os.environ.get("PBSMOCK_SLURM_JOB", "")
    if not slurm_job and os.environ.get("PBS_JOBID"):
        # from the login node (hpcui's usage looks), where real sites use ssh to the job's
        # nodes: the job named by PBS_JOBID; a plain job only (an array element: its own id)
        m = _ID.fullmatch(os.environ["PBS_JOBID"])
        job = load(int(m[1])) if m else None
        if job is not None:
            slurm_job = f"{job['slurm_id']}_{m[2]}" if m[2] else job["slurm_id"]
    if not slurm_job or host == socket.gethostname():
        os.execvp(cmd[0], cmd)
    srun = ["srun", f"--jobid={slurm_job}", f"--nodelist={host}", "--nodes=1", "--ntasks=1"]
    srun += ["--overlap", "--cpus-per-task=1", "--mem=0", "--export=ALL", "--quiet"]
    os.execvp("srun", [*srun, sys.executable, str(HERE), "tm-exec", *cmd])
    return 1


def tm_exec(args: list[str]) -> int:
    """The TM-spawned process on the sister node: Slurm's variables removed, then CMD."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    os.execvpe(args[0], args, env)
    return 1


def main() -> int:
    command, args = sys.argv[1], sys.argv[2:]
    if command == "qsub" and args[:1] in (["--version"], ["--help"]):
        if args[0] == "--version":
            print(f"pbs_version = {VERSION}")
            return 0
        print("qsub: unrecognized option '--help'\nusage: qsub [-J X-Y[:Z]] ...", file=sys.stderr)
        return 2
    handler = {
        "qsub": qsub,
        "qstat": qstat,
        "qselect": qselect,
        "qdel": qdel,
        "qhold": qhold,
        "qrls": qrls,
        "qalter": qalter,
        "qrerun": qrerun,
        "run": run,
        "pbs_tmrsh": pbs_tmrsh,
        "tm-exec": tm_exec,
    }[command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
