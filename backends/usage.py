"""What a running job uses, sampled by ONE command per job: GPUs per node, CPU and RSS.

Slurm: a step inside the job's allocation (`srun --jobid=ID --overlap`, one task per
node, `--label`) runs nvidia-smi (or rocm-smi) on each of its nodes; `sstat` gives CPU
time and RSS per step and `squeue -s` each step's elapsed time. Only the job's own GPUs
count: the step's SLURM_STEP_GPUS selects them where nvidia-smi lists the whole node, and a job
Slurm gave no GPU (a CPU job on a GPU node) shows none, not the node's.
The local cluster: the job's process group (`ps`) and nvidia-smi directly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hpcui.backends.gpu_smi import (
    GpuQueryError,
    GpuReading,
    nvidia_query_command,
    parse_nvidia_query,
    parse_rocm_json,
    rocm_query_command,
)
from hpcui.backends.scheduler_text import duration_s, parse_duration, parse_mem
from hpcui.backends.shell import quote

__all__ = [
    "NodeReading",
    "StepReading",
    "UsageReading",
    "local_usage_command",
    "parse_local_usage",
    "parse_slurm_usage",
    "slurm_usage_command",
]

_MARK = "@@hpcui"


@dataclass(frozen=True)
class NodeReading:
    host: str
    gpus: tuple[GpuReading, ...] = ()
    #: why this node has no GPU figures (no tool, tool failed), None when it has them
    note: str | None = None


@dataclass(frozen=True)
class StepReading:
    """One job step (Slurm) or the job's processes (local): CPU seconds per task so far."""

    step: str
    ntasks: int
    cpu_s: float | None  # average CPU time per task since the step began
    elapsed_s: float | None
    rss_mb: float | None  # average RSS per task now
    max_rss_mb: float | None

    @property
    def cpu_pct(self) -> float | None:
        """CPU per task over the step's life, % of one core (100 = one core busy)."""
        if self.cpu_s is None or not self.elapsed_s:
            return None
        return 100.0 * self.cpu_s / self.elapsed_s


@dataclass(frozen=True)
class UsageReading:
    nodes: tuple[NodeReading, ...] = ()
    steps: tuple[StepReading, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


#: which GPUs of the node are the job's, as the probe says it: in a Slurm step, Slurm's
#: own list, `none` when it gave the job none; elsewhere (PBS's node shell, the local
#: cluster) unknown here (empty), and decided by the caller's own means
SLURM_GPUS = "${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-none}}"
UNKNOWN_GPUS = "${SLURM_STEP_GPUS-}"


def _probe(gpus: str = UNKNOWN_GPUS) -> str:
    """Runs on each node: which GPUs are the job's, then the GPU table."""
    nv = " ".join(nvidia_query_command())
    amd = " ".join(rocm_query_command())
    return (
        f'echo "{_MARK} node $(hostname) {gpus}"; '
        f"if command -v nvidia-smi >/dev/null 2>&1; then echo '{_MARK} smi nvidia'; {nv} 2>&1; "
        f'echo "{_MARK} rc $?"; '
        f"elif command -v rocm-smi >/dev/null 2>&1; then echo '{_MARK} smi amd'; {amd} 2>&1; "
        f'echo "{_MARK} rc $?"; '
        f"else echo '{_MARK} smi none'; fi"
    )


def slurm_usage_command(job_id: str) -> str:
    """One shell command: step times, sstat, then the probe on every node of the job."""
    j = quote(job_id)
    # an array element (123_4) has its own numeric id (%A): srun and sstat want that one
    return (
        f"export SLURM_TIME_FORMAT=standard; r=$(squeue -h -t R -j {j} -o '%A %D' 2>/dev/null); "
        "set -- $r; id=${1:-}; n=${2:-}; "
        f"echo '{_MARK} steps'; [ -n \"$id\" ] && squeue -h -s -j \"$id\" -o '%i|%M' 2>&1; "
        f'echo \'{_MARK} sstat\'; [ -n "$id" ] && sstat -a -n -P -j "$id" '
        "-o JobID,NTasks,AveCPU,AveRSS,MaxRSS 2>&1; "
        f'echo "{_MARK} nodes $n"; '
        '[ -n "$n" ] && srun --jobid="$id" --overlap --nodes="$n" --ntasks="$n" '
        f"--ntasks-per-node=1 --label --quiet --time=1 sh -c {quote(_probe(SLURM_GPUS))} 2>&1; "
        f"echo '{_MARK} end'"
    )


def _answer(text: str) -> dict[str, list[str]]:
    """The sections of one usage command's answer; a cut-off answer is an error, never an
    empty look."""
    lines = text.splitlines()
    if f"{_MARK} end" not in lines:
        raise ValueError("the usage command was cut off (no end mark): " + text[-200:])
    return _sections(lines)


def _nodes(sec: dict[str, list[str]], stray_as: str) -> tuple[list[NodeReading], list[str]]:
    """The probe's readings per node, or why there are none (`nodes N` header: 0 or empty
    when the job is not running); lines from no node are notes under `stray_as`."""
    node_lines = sec.get("nodes", [])
    header = node_lines[0].split() if node_lines else []
    if len(header) < 3 or header[2] == "0":
        return [], ["the job is not running: no node to sample"]
    nodes, stray = _probe_lines(node_lines[1:])
    return nodes, [f"{stray_as}: {s[:200]}" for s in stray]


def _sections(lines: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    name = ""
    for line in lines:
        if line.startswith(f"{_MARK} ") and not line.startswith(f"{_MARK} nodes"):
            name = line.split()[1]
            out.setdefault(name, [])
        elif line.startswith(f"{_MARK} nodes"):
            name = "nodes"
            out.setdefault(name, [line])
        else:
            out.setdefault(name, []).append(line)
    return out


def _gpu_indices(text: str) -> list[int] | None:
    """The job's GPU indices on the node; [] when Slurm gave it none (`none`: a CPU job);
    None when the line says nothing usable (all the node's GPUs are shown)."""
    if text == "none":
        return []
    items = [x for x in text.split(",") if x.strip()]
    if not items or not all(x.strip().isdigit() for x in items):
        return None
    return [int(x) for x in items]


def _node(
    host: str, job_gpus: list[int] | None, tool: str, body: list[str], rc: int
) -> NodeReading:
    if job_gpus == []:  # a CPU job on a GPU node: the node's GPUs are other jobs'
        return NodeReading(host, note="no GPU allocated to this job on this node")
    if tool == "none":
        return NodeReading(host, note="no nvidia-smi or rocm-smi on this node")
    text = "\n".join(body)
    if rc != 0:
        first = next((ln for ln in body if ln.strip()), f"exit {rc}")
        return NodeReading(
            host,
            note=f"{'nvidia-smi' if tool == 'nvidia' else 'rocm-smi'} failed: {first.strip()[:200]}",
        )
    try:
        gpus = parse_nvidia_query(text) if tool == "nvidia" else parse_rocm_json(text)
    except GpuQueryError as exc:
        return NodeReading(host, note=str(exc))
    if job_gpus is not None:
        mine = [g for g in gpus if g.index in job_gpus]
        # a node that shows only the job's GPUs (cgroup-constrained) renumbers them: keep all
        if len(mine) == len(job_gpus) and len(gpus) > len(job_gpus):
            gpus = mine
    return NodeReading(host, tuple(gpus))


def _probe_lines(lines: Sequence[str]) -> tuple[list[NodeReading], list[str]]:
    """The `--label`ed output of the probe: lines `<task>: text`, per node in task order."""
    by_task: dict[int, list[str]] = {}
    stray: list[str] = []
    for line in lines:
        m = re.match(r"\s*(\d+): ?(.*)$", line)
        if m is None:
            if line.strip():
                stray.append(line.strip())
            continue
        by_task.setdefault(int(m.group(1)), []).append(m.group(2))
    nodes = []
    for task in sorted(by_task):
        host, job_gpus, tool, rc, body = f"task {task}", None, "none", 0, []
        for text in by_task[task]:
            if text.startswith(f"{_MARK} node "):
                parts = text.split()
                host = parts[2] if len(parts) > 2 else host
                job_gpus = _gpu_indices(parts[3]) if len(parts) > 3 else None
            elif text.startswith(f"{_MARK} smi "):
                tool = text.split()[2]
            elif text.startswith(f"{_MARK} rc "):
                rc = int(text.split()[2]) if text.split()[2].isdigit() else 1
            else:
                body.append(text)
        nodes.append(_node(host, job_gpus, tool, body, rc))
    return nodes, stray


def _suffix(step_id: str) -> str:
    return step_id.strip().rpartition(".")[2]


def _steps(
    step_lines: Sequence[str], sstat_lines: Sequence[str]
) -> tuple[list[StepReading], list[str]]:
    notes: list[str] = []
    elapsed: dict[str, float | None] = {}  # by step suffix (`.0`, `.batch`)
    for line in step_lines:
        if "|" in line:
            sid, _, t = line.partition("|")
            try:
                elapsed[_suffix(sid)] = parse_duration(t)
            except ValueError:
                notes.append(f"squeue: {line.strip()[:200]}")
        elif line.strip():
            notes.append(f"squeue: {line.strip()[:200]}")
    steps = []
    for line in sstat_lines:
        parts = line.split("|")
        if len(parts) != 5 or not parts[1].strip().isdigit():
            if line.strip():
                notes.append(f"sstat: {line.strip()[:200]}")
            continue
        sid, ntasks, cpu, ave, peak = (p.strip() for p in parts)
        try:
            ave_b, max_b = parse_mem(ave), parse_mem(peak)
            cpu_s = parse_duration(cpu) if cpu else None
        except ValueError:
            notes.append(f"sstat: {line.strip()[:200]}")
            continue
        steps.append(
            StepReading(
                step=sid,
                ntasks=int(ntasks),
                cpu_s=cpu_s,
                elapsed_s=elapsed.get(_suffix(sid)),
                rss_mb=None if ave_b is None else ave_b / 2**20,
                max_rss_mb=None if max_b is None else max_b / 2**20,
            )
        )
    return steps, notes


#: joins qstat -f's continuation lines (a tab-indented line carries on the one above)
_JOIN = (
    "awk '/^\\t/ {sub(/^\\t/, \"\"); l = l $0; next} {if (NR > 1) print l; l = $0} END {print l}'"
)


def pbs_usage_command(job_id: str, qstat: Sequence[str], node_shell: str) -> str:
    """PBS: the job's qstat (resources_used: CPU time, memory), then the probe on each of
    its exec hosts through `node_shell HOST sh` (default ssh: PBS sites let you onto the
    nodes of your running job), the probe on its stdin, lines labelled `i: ` per host."""
    j = quote(job_id)
    state = (
        "printf '%s\\n' \"$q\" | sed -n -e 's/^ *job_state = //p' "
        '-e \'s/.*"job_state" *: *"\\([^"]*\\)".*/\\1/p\' | head -n 1'
    )
    hosts = (
        f"printf '%s\\n' \"$q\" | {_JOIN} | sed -n -e 's/^ *exec_host = //p' "
        "-e 's/.*\"exec_host\" *: *\"\\([^\"]*\\)\".*/\\1/p' | head -n 1 | tr '+' '\\n' "
        "| cut -d/ -f1 | awk 'NF && !seen[$0]++'"
    )
    return (
        f"q=$({' '.join(quote(a) for a in qstat)} 2>&1); echo '{_MARK} qstat'; "
        f'printf \'%s\\n\' "$q"; hosts=; [ "$({state})" = R ] && hosts=$({hosts}); '
        "set -- $hosts; "
        f'echo "{_MARK} nodes $#"; i=0; '
        f'for h in "$@"; do printf \'%s\\n\' {quote(_probe())} | PBS_JOBID={j} {node_shell} "$h" sh '
        f'2>&1 | sed "s/^/$i: /"; i=$((i + 1)); done; '
        f"echo '{_MARK} end'"
    )


def pbs_mem_mb(text: str | None) -> float | None:
    """PBS sizes: `123456kb`, `2gb`, `512mb`, `1024b` (1024-based, as PBS counts)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)[bw]?\s*", (text or "").lower())
    if m is None:
        return None
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ") / 2**20


def pbs_steps(job_id: str, used: dict[str, str]) -> tuple[StepReading, ...]:
    """PBS counts the whole job (resources_used): per core, as one "step"."""
    if not used:
        return ()

    ncpus = int(used["ncpus"]) if used.get("ncpus", "").isdigit() else 1
    cput, wall = duration_s(used.get("cput")), duration_s(used.get("walltime"))
    mem = pbs_mem_mb(used.get("mem"))
    return (
        StepReading(
            step=job_id,
            ntasks=max(ncpus, 1),
            cpu_s=None if cput is None else cput / max(ncpus, 1),
            elapsed_s=None if wall is None else float(wall),
            rss_mb=None if mem is None else mem / max(ncpus, 1),
            max_rss_mb=None,
        ),
    )


def parse_pbs_usage(text: str) -> tuple[str, UsageReading]:
    """The qstat text (for the caller's dialect parser) and the nodes' readings."""
    sec = _answer(text)
    nodes, notes = _nodes(sec, "node shell")
    return "\n".join(sec.get("qstat", [])), UsageReading(tuple(nodes), (), tuple(notes))


def parse_slurm_usage(text: str) -> UsageReading:
    """The output of `slurm_usage_command`; what could not be read becomes a note."""
    sec = _answer(text)
    steps, notes = _steps(sec.get("steps", []), sec.get("sstat", []))
    nodes, node_notes = _nodes(sec, "srun")
    return UsageReading(tuple(nodes), tuple(steps), (*notes, *node_notes))


def local_usage_command(job_id: str, state_dir: str) -> str:
    """The local cluster: the job's processes (its launcher's session), the GPUs it holds
    (hpcui.node.gpu_slots) and this machine's GPU table."""
    launcher = job_id.partition("_")[0]
    if not launcher.isdigit():
        raise ValueError(f"not a local job id: {job_id!r}")
    held = f"{quote(state_dir)}/gpus/held/{quote(job_id)}"
    return (
        f"echo '{_MARK} ps'; ps -o pcpu=,rss=,etimes=,comm= -s {launcher} 2>/dev/null; "
        f"echo '{_MARK} held'; cat {held} 2>/dev/null; echo; "
        f"echo '{_MARK} nodes 1'; {{ {_probe()}; }} | sed 's/^/0: /'; echo '{_MARK} end'"
    )


def parse_local_usage(text: str, job_id: str) -> UsageReading:
    sec = _answer(text)
    # the ranks, not the launcher's shells
    procs = [
        p
        for p in (ln.split() for ln in sec.get("ps", []))
        if len(p) == 4 and p[3] not in ("bash", "sh")
    ]
    steps = []
    if procs:
        pcpu = sum(float(p[0]) for p in procs)
        rss = sum(int(p[1]) for p in procs) / 1024
        elapsed = max(float(p[2]) for p in procs)
        steps.append(
            StepReading(
                step=job_id,
                ntasks=len(procs),
                cpu_s=pcpu / 100 * elapsed / len(procs),
                elapsed_s=elapsed,
                rss_mb=rss / len(procs),
                max_rss_mb=None,
            )
        )
    nodes, _ = _probe_lines(sec.get("nodes", [])[1:])
    held = " ".join(sec.get("held", [])).split()
    if len(held) == 2:  # "<launcher pid> <uuid>,<uuid>": only the job's own GPUs
        mine = set(held[1].split(","))
        nodes = [
            NodeReading(
                n.host, tuple(g for g in n.gpus if g.uuid in mine or str(g.index) in mine), n.note
            )
            for n in nodes
        ]
    elif nodes:  # no GPU of its own: none of the machine's GPUs is the job's
        nodes = [NodeReading(n.host, (), n.note) for n in nodes]
    notes = () if procs else ("the job has no running process",)
    return UsageReading(tuple(nodes), tuple(steps), notes)
