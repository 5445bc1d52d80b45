"""PBS Pro and Torque batch scripts, and the command lines that submit, watch and cancel them.

The script runs stock submitit's ``process_job`` on the compute node(s) with hpcui's PBS
job environment (``hpcui.node.pbs_env``). PBS has no srun, so the script is its own
launcher: on the first node it starts the other nodes' launchers (``pbs_tmrsh`` on PBS
Pro, ``pbsdsh -h`` on Torque, ``ssh`` elsewhere; ``HPCUI_PBS_RSH`` overrides), and each
node launcher starts one process per task (per GPU) with the rank variables that
``hpcui.distributed`` reads: HPCUI_RANK, HPCUI_LOCAL_RANK, HPCUI_WORLD_SIZE,
HPCUI_LOCAL_WORLD_SIZE, HPCUI_NODE_RANK, HPCUI_NUM_NODES.

Ids (decision): hpcui names a plain job by the id qsub printed (``1234.server``) and an
array element ``<seq>.<server>_<index>`` (``1234.server_7`` for PBS's ``1234[7].server``),
so result files are ``1234.server_7_0_result.pkl`` (no brackets in file names) and the
``<base>_<index>`` rule the registry applies to Slurm arrays holds unchanged.

Over 500 lines: PBS Pro's and Torque's scripts and command lines, whose differences sit side by side (select vs nodes=, -J vs -t, qstat's forms).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hpcui.backends import chain, containers
from hpcui.backends.batch import BatchSpec
from hpcui.backends.getopt_names import options_set
from hpcui.backends.job_paths import CALL_INDEX_ENV, log_name, pickle_name, submitted_name
from hpcui.backends.launch import LAUNCHERS, agent_per_node, per_node_lines, per_task_lines
from hpcui.backends.pbs.dialect import PbsDialect
from hpcui.backends.pbs.ids import parse_pbs_id
from hpcui.backends.shell import quote, verify_lines
from hpcui.backends.slurm import accounting as slurm_accounting
from hpcui.backends.slurm import script as slurm_script

TOKEN_VAR = "HPCUI_TOKEN"
#: the compute-side runner: submitit's process_job with the PBS job environment
RUNNER = "hpcui.node.pbs_env"

_HPCUI_ARRAY_ID = re.compile(r"(?P<seq>\d+)(?P<server>\.[^_\s]\S*?)?_(?P<index>\d+)")


# --- ids ---------------------------------------------------------------------------------


def base_id(qsub_id: str) -> str:
    """hpcui's base id for what qsub printed: ``1234[].server`` -> ``1234.server``."""
    parsed = parse_pbs_id(qsub_id)
    return f"{parsed.seq}.{parsed.server}" if parsed.server else str(parsed.seq)


def to_pbs_id(job_id: str) -> str:
    """hpcui id -> PBS id: ``1234.server_7`` -> ``1234[7].server``; plain ids unchanged."""
    m = _HPCUI_ARRAY_ID.fullmatch(job_id.strip())
    if m is None:
        return job_id.strip()
    return f"{m['seq']}[{m['index']}]{m['server'] or ''}"


def array_parent(job_id: str) -> str | None:
    """``1234.server_7`` -> ``1234[].server`` (the id qstat -t expands); None for plain ids."""
    m = _HPCUI_ARRAY_ID.fullmatch(job_id.strip())
    return f"{m['seq']}[]{m['server'] or ''}" if m else None


def from_pbs_id(pbs_id: str) -> str | None:
    """PBS id -> hpcui id: ``1234[7].server`` -> ``1234.server_7``; None for a parent."""
    parsed = parse_pbs_id(pbs_id)
    if parsed.is_array_parent:
        return None
    server = f".{parsed.server}" if parsed.server else ""
    if parsed.array_index is None:
        return f"{parsed.seq}{server}"
    return f"{parsed.seq}{server}_{parsed.array_index}"


def id_key(job_id: str) -> tuple[int, int | None] | None:
    """(sequence number, array index) of an hpcui or PBS id: equal on both sides even when
    qstat prints a longer server name (``pbs01.example.org``) than qsub did (``pbs01``)."""
    try:
        parsed = parse_pbs_id(to_pbs_id(job_id))
    except ValueError:
        return None
    return parsed.seq, parsed.array_index


# --- directives --------------------------------------------------------------------------


def format_walltime(seconds: int) -> str:
    """PBS ``HH:MM:SS`` with hours past 24 (``120:00:00``), rounded up to whole minutes."""
    minutes = -(-seconds // 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def _check_spec(spec: BatchSpec, dialect: PbsDialect) -> None:
    """Refuse what PBS cannot express instead of dropping it (the wrapper's sin)."""
    if dialect == "slurm-torque-wrapper":
        _check_wrapper_spec(spec)
        return
    if spec.qos:
        raise ValueError(f"PBS has no QoS (got qos={spec.qos!r}): pick a queue instead")
    if spec.gpu_type:
        raise ValueError(
            f"PBS has no standard GPU-type resource (got gpu_type={spec.gpu_type!r}): put the "
            "site's own chunk resource in `constraint`, e.g. gpu_model=h100"
        )
    if spec.constraint and "=" not in spec.constraint:
        raise ValueError(
            f"on PBS a constraint is a chunk resource `name=value` (got {spec.constraint!r})"
        )
    if spec.image is not None and spec.image.runtime == "pyxis":
        raise ValueError("pyxis is a Slurm plugin: on PBS use the enroot or apptainer runtime")
    if spec.launcher not in LAUNCHERS or spec.launcher == "auto":
        raise ValueError(f"launcher={spec.launcher!r} is not available on PBS")


def directives(spec: BatchSpec, dialect: PbsDialect = "pbspro") -> list[str]:
    """The ``#PBS`` lines (without the prefix) for PBS Pro, Torque or Slurm's wrapper."""
    _check_spec(spec, dialect)
    if dialect == "slurm-torque-wrapper":
        return wrapper_directives(spec)
    ncpus = spec.tasks_per_node * spec.cpus_per_task
    is_array = spec.array_size is not None
    d = [f"-N {spec.name}", "-S /bin/bash"]
    if dialect == "torque":
        chunk = f"nodes={spec.nodes}:ppn={ncpus}"
        if spec.gpus_per_node:
            chunk += f":gpus={spec.gpus_per_node}"
        if spec.constraint:
            chunk += f":{spec.constraint.split('=')[0]}"  # Torque node properties are names
        d.append(f"-l {chunk}")
        if spec.mem_mb is not None:
            d.append(f"-l mem={spec.mem_mb * spec.nodes}mb")  # Torque: mem is per job
    else:
        chunk = f"select={spec.nodes}:ncpus={ncpus}"
        if spec.gpus_per_node:
            chunk += f":ngpus={spec.gpus_per_node}"
        if spec.mem_mb is not None:
            chunk += f":mem={spec.mem_mb}mb"  # per chunk = per node
        chunk += f":mpiprocs={spec.tasks_per_node}"
        if spec.constraint:
            chunk += f":{spec.constraint}"
        d.append(f"-l {chunk}")
        place = [p for p, on in (("scatter", spec.nodes > 1), ("excl", spec.exclusive)) if on]
        if place:
            d.append(f"-l place={':'.join(place)}")
    if spec.time_s is not None:
        d.append(f"-l walltime={format_walltime(spec.time_s)}")
    if spec.account:
        d.append(f"-{'A' if dialect == 'torque' else 'P'} {spec.account}")
    if spec.partition:
        d.append(f"-q {spec.partition}")
    if dialect == "torque" and spec.exclusive:
        d.append("-n")
    if spec.after_ok:
        d.append(f"-W depend=afterok:{':'.join(to_pbs_id(j) for j in spec.after_ok)}")
    if is_array:
        d.extend(_array_directives(spec, dialect))
    # Only what the shell prints before the script's own redirection lands here; PBS Pro
    # substitutes ^array_index^, Torque appends -<index> to array outputs itself.
    per_index = "_^array_index^" if is_array and dialect == "pbspro" else ""
    d += ["-j oe", f"-o {spec.folder}/pbs{per_index}.log"]
    d.append(f"-v {TOKEN_VAR}={spec.token}")
    return d + _extra(spec)


#: options hpcui sets itself: an `extra` directive may not replace them (name, shell,
#: array, log files and their joining, the token variable)
RESERVED = frozenset({"-N", "-S", "-J", "-t", "-o", "-e", "-j", "-v"})


#: qsub's options that take no argument: getopt reads on after them within one word
#: (`-hJ 0-3` is -h and -J 0-3)
_NO_ARG = "fhIVXz"


def _extra(spec: BatchSpec) -> list[str]:
    out = []
    for x in spec.extra:
        option = x if x.startswith("-") else f"-{x}"
        hit = options_set(option, long_names=(), no_arg=_NO_ARG) & RESERVED
        if hit:
            raise ValueError(
                f"extra directive {x!r} would replace hpcui's own {', '.join(sorted(hit))} "
                "(hpcui sets the job's name, shell, array, log files and token itself; qsub "
                "reads short options run together one by one; use the resource keywords for "
                "the rest)"
            )
        out.append(option)
    return out


def _array_directives(spec: BatchSpec, dialect: PbsDialect) -> list[str]:
    size = spec.array_size or 0
    limit = spec.array_parallelism
    if dialect == "torque":
        return [f"-t 0-{size - 1}" + (f"%{limit}" if limit else "")]
    # PBS Pro refuses a range with one element (chk_Jrange: start < end); a step past the
    # end gives exactly one subjob, index 0. `%N` is refused too: max_run_subjobs is the
    # attribute (OpenPBS 20+; an older server rejects it with a clear qsub error).
    out = ["-J 0-1:2" if size == 1 else f"-J 0-{size - 1}"]
    if limit:
        out.append(f"-W max_run_subjobs={limit}")
    return out


# --- Slurm's Torque wrapper ---------------------------------------------------------------
# The wrapper's qsub (Perl, slurm-wlm-torque) reads only its command line; the script's
# `#PBS` lines are read by sbatch itself, which knows Torque's `nodes=N:ppn=P:gpus=G` (it
# becomes -N, -n N*P and a gres/gpu per node) but not PBS Pro's `select`/`ngpus` (dropped
# without a word). So the wrapper gets ONE `-l` in Torque syntax, verified against the
# real wrapper by tests/integration/test_pbs_wrapper.py (scontrol shows every resource).
# What that language cannot say is refused, never dropped.

#: what the wrapper's qsub splices unquoted into a shell command line (its backticks)
_WRAPPER_SAFE = re.compile(r"[A-Za-z0-9_./%+=:@,-]+")


def _check_wrapper_spec(spec: BatchSpec) -> None:
    use_slurm = '; use scheduler = "slurm" on this cluster for that'
    for what, value in (
        ("a QoS", spec.qos),
        ("a GPU type", spec.gpu_type),
        ("a constraint", spec.constraint),  # node properties become host names (-w) there
        ("an exclusive node", spec.exclusive or None),
    ):
        if value:
            raise ValueError(f"Slurm's Torque wrapper cannot express {what} ({value!r}){use_slurm}")
    if spec.array_size is not None:
        raise ValueError(
            "Slurm's Torque wrapper cannot show array elements (its qstat prints one record "
            f"per array and `qstat ID_N` finds nothing), so map() cannot be tracked{use_slurm}"
        )
    if not _WRAPPER_SAFE.fullmatch(spec.folder):
        raise ValueError(
            f"the job folder {spec.folder!r} has characters Slurm's Torque wrapper would pass "
            "to a shell unquoted; set a remote_base without spaces or shell characters"
        )


def wrapper_directives(spec: BatchSpec) -> list[str]:
    """The ``#PBS`` lines for Slurm's Torque wrapper: one ``-l``, Torque syntax, mem per node."""
    ncpus = spec.tasks_per_node * spec.cpus_per_task
    res = f"nodes={spec.nodes}:ppn={ncpus}"
    if spec.gpus_per_node:
        res += f":gpus={spec.gpus_per_node}"
    if spec.time_s is not None:
        res += f",walltime={format_walltime(spec.time_s)}"
    if spec.mem_mb is not None:
        res += f",mem={spec.mem_mb}mb"  # sbatch's PBS reader makes it --mem: per node
    d = [f"-N {spec.name}", f"-l {res}"]
    if spec.account:
        d.append(f"-A {spec.account}")
    if spec.partition:
        d.append(f"-q {spec.partition}")
    if spec.after_ok:  # sbatch's PBS reader takes depend= as Slurm's --dependency
        d.append(f"-W depend=afterok:{':'.join(spec.after_ok)}")
    return d + _extra(spec)


def render_wrapper_script(spec: BatchSpec) -> str:
    """A job for Slurm's Torque wrapper: PBS directives, then a Slurm body, because what
    runs is a plain Slurm job (srun starts the tasks; no PBS_NODEFILE, no PBS_JOBID)."""
    lines = _header(spec, "slurm-torque-wrapper")
    # The wrapper's qstat shows no Variable_List: the token rides in Slurm's comment, where
    # find_token (squeue) looks after a dropped connection.
    lines.append(f"#SBATCH --comment={slurm_script.TOKEN_PREFIX}{spec.token}")
    lines.append(f"#SBATCH --signal=USR2@{spec.signal_delay_s}")  # Torque's -l has no signal
    return "\n".join([*lines, *slurm_script.body(spec, reshape=True)])


def wrapper_qsub_command(script_path: str) -> list[str]:
    """``qsub -j oe -o FOLDER/pbs-%j.log SCRIPT``: the wrapper never reads ``#PBS -o``/``-j``
    (sbatch does, after the wrapper's own default ``-o NAME.o%A`` in the cwd won)."""
    if not _WRAPPER_SAFE.fullmatch(script_path):
        raise ValueError(f"unsafe path for Slurm's Torque wrapper: {script_path!r}")
    folder = script_path.rpartition("/")[0]
    log = f"{folder}/pbs-%j.log" if folder else "pbs-%j.log"  # relative: beside the script
    return ["qsub", "-j", "oe", "-o", log, script_path]


#: all jobs in full, the user's name first (the wrapper has no qselect; its -u drops -f)
WRAPPER_USER_JOBS = "id -un; qstat -f; true"


def user_jobs_command(dialect: PbsDialect, *, history: bool = False) -> str:
    """The user's jobs in full, one round trip: ``qselect -u`` then ``qstat -f`` of those.

    PBS Pro adds ``-x`` for finished jobs with ``history`` (then as text, see below);
    Torque prints text, PBS Pro JSON. Nothing of the user's text goes in: the user name
    comes from ``id -un`` remotely.
    """
    x = "-x " if history and dialect == "pbspro" else ""
    if dialect == "torque":
        return f'u=$(id -un); ids=$(qselect {x}-u "$u"); [ -z "$ids" ] || qstat {x}-t -f $ids'
    if history:
        # a server that keeps history lists hundreds of the user's jobs: one qstat each took
        # 75 s for 360 on the dev site (0.2 s a call), so history is read as text, whose
        # qstat lists every operand (xargs splits a list too long for one command line):
        # 2 s (parse_torque_qstat_f reads it, as PBS Pro's)
        # (a server whose qstat prints no text gets the JSON loop: _read tells them apart;
        # not on a failed status, which one job purged meanwhile also gives)
        return 'u=$(id -un); ids=$(qselect -x -u "$u"); [ -z "$ids" ] || { ' + _TEXT_OR_EACH + " }"
    # one qstat per id: OpenPBS prints only the first id's jobs with -F json (_EACH)
    return (
        f'u=$(id -un); ids=$(qselect {x}-u "$u"); '
        f'for j in $ids; do qstat {x}-t -f -F json "$j"; done'
    )


#: splits the wrapper's status output: qstat's text before it, sacct's after
SACCT_MARK = "__HPCUI_SACCT__"


def is_wrapper_id(job_id: str) -> bool:
    """Whether an id is one the wrapper's qsub prints (a Slurm id; array elements never)."""
    return re.fullmatch(r"\d+(?:_\d+)?", job_id.strip()) is not None


def wrapper_status_command(job_ids: Sequence[str]) -> str:
    """ONE round trip: ``qstat -f`` for live states, then sacct for how ended jobs ended."""
    ids = sorted({j.strip() for j in job_ids})
    bad = [j for j in ids if not is_wrapper_id(j)]
    if bad:
        raise ValueError(f"not Slurm job ids: {bad}")
    qstat = " ".join(["qstat", "-f", *ids])  # digits and _ only, checked above
    sacct = " ".join(quote(a) for a in slurm_accounting.sacct_command(ids))
    return f"{qstat} 2>/dev/null; echo {SACCT_MARK}; {sacct} 2>/dev/null; true"


# --- the script --------------------------------------------------------------------------

# Derives hpcui's job id from PBS's: PBS Pro sets PBS_ARRAY_INDEX, Torque PBS_ARRAYID;
# `1234[7].server` -> `1234.server_7` (see the module docstring).
# An array element reads its call from the calls pack (HPCUI_CALL_INDEX, see job_paths).
_JOB_ID = r"""idx="${PBS_ARRAY_INDEX:-${PBS_ARRAYID:-}}"
if [ -n "$idx" ]; then
  HPCUI_JOB_ID="${PBS_JOBID%%\[*}${PBS_JOBID#*\]}_$idx"; pkl=
  export @INDEX@="$idx"
else
  HPCUI_JOB_ID="$PBS_JOBID"; pkl=@TASK_PKL@
fi""".replace("@INDEX@", CALL_INDEX_ENV).replace("@TASK_PKL@", pickle_name())

# One node: start this node's tasks (one per GPU), wait for all, return the worst status.
_RUN_NODE = r"""run_node() {
  local k r rc=0 pids=()
  for ((k = 0; k < HPCUI_LOCAL_WORLD_SIZE; k++)); do
    r=$((HPCUI_NODE_RANK * HPCUI_LOCAL_WORLD_SIZE + k))
    HPCUI_RANK=$r HPCUI_LOCAL_RANK=$k @COMMAND@ \
      >>"$HPCUI_JOB_FOLDER/@LOG_OUT@" 2>>"$HPCUI_JOB_FOLDER/@LOG_ERR@" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}"""

# First node: the other nodes' launchers, then this node's tasks; the worst status wins.
_LAUNCH = r"""mapfile -t hosts < <(awk 'NF && !seen[$1]++ {print $1}' "${PBS_NODEFILE:-/dev/null}")
[ ${#hosts[@]} -gt 0 ] || hosts=("$(hostname)")
export HPCUI_NUM_NODES=${#hosts[@]}
export HPCUI_WORLD_SIZE=$((HPCUI_NUM_NODES * HPCUI_LOCAL_WORLD_SIZE))
if [ -n "${PBS_NODEFILE:-}" ]; then  # sister nodes may not have it: share a copy
  cp "$PBS_NODEFILE" "$HPCUI_JOB_FOLDER/${HPCUI_JOB_ID}.nodes"
fi
if [ -n "${HPCUI_PBS_RSH:-}" ]; then read -r -a rsh <<<"$HPCUI_PBS_RSH"
elif command -v pbs_tmrsh >/dev/null 2>&1; then rsh=(pbs_tmrsh)
elif command -v pbsdsh >/dev/null 2>&1; then rsh=(pbsdsh -h)
else rsh=(ssh -o BatchMode=yes); fi
pids=()
for ((n = 1; n < HPCUI_NUM_NODES; n++)); do
  "${rsh[@]}" "${hosts[n]}" env HPCUI_NODE_RANK=$n HPCUI_JOB_ID="$HPCUI_JOB_ID" \
    HPCUI_JOB_START="$HPCUI_JOB_START" \
    @INDEX@="${@INDEX@:-}" \
    PBS_JOBID="$PBS_JOBID" PBS_NODEFILE="$HPCUI_JOB_FOLDER/${HPCUI_JOB_ID}.nodes" \
    HPCUI_NUM_NODES=$HPCUI_NUM_NODES HPCUI_WORLD_SIZE=$HPCUI_WORLD_SIZE \
    bash "$HPCUI_JOB_FOLDER/submission.sh" --node </dev/null &
  pids+=($!)
done
rc=0
HPCUI_NODE_RANK=0 run_node || rc=$?
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc""".replace("@INDEX@", CALL_INDEX_ENV)


def _command(spec: BatchSpec, runner: str) -> str:
    """A task's command line: the cluster's Python, or the image's through its runtime."""
    args = f'-u -m {runner} "$HPCUI_JOB_FOLDER"'
    if spec.image is None:
        return f'"$HPCUI_PYTHON" {args}'
    return containers.wrap(spec.image, args)


def _header(spec: BatchSpec, dialect: PbsDialect) -> list[str]:
    """The shebang and the checked ``#PBS`` lines: a newline in a value would start a
    line of shell code, so it is refused."""
    lines = ["#!/bin/bash"]
    for d in directives(spec, dialect):
        if "\n" in d:
            raise ValueError(f"newline in PBS directive {d!r}")
        lines.append(f"#PBS {d}")
    return lines


def render_script(spec: BatchSpec, dialect: PbsDialect = "pbspro") -> str:
    """The whole qsub script (also run as ``submission.sh --node`` on the other nodes)."""
    if dialect == "slurm-torque-wrapper":
        return render_wrapper_script(spec)
    lines = _header(spec, dialect)
    lines += [
        "",
        "# generated by hpcui: runs stock submitit under hpcui's PBS job environment",
        "export SUBMITIT_EXECUTOR=pbs",
        f"export HPCUI_JOB_FOLDER={quote(spec.folder)} HPCUI_PYTHON={quote(spec.python)}",
        f"export HPCUI_LOCAL_WORLD_SIZE={spec.tasks_per_node}",
    ]
    if spec.time_s is not None:  # PBS has no early signal: the runner sends USR2 itself
        lines.append(
            f"export HPCUI_TIME_LIMIT_S={spec.time_s} HPCUI_SIGNAL_DELAY_S={spec.signal_delay_s}"
        )
    if spec.pythonpath:
        path = ":".join(spec.pythonpath)
        lines.append(f'export PYTHONPATH={quote(path)}"${{PYTHONPATH:+:$PYTHONPATH}}"')
    for key, value in spec.env.items():
        lines.append(f"export {key}={quote(value)}")
    runner, log_rank = RUNNER, "${r}"
    if agent_per_node(
        spec.launcher, spec.nodes
    ):  # hpcui/node/torchrun.py: the node's one task is the agent
        runner, log_rank = "hpcui.node.torchrun agent", "0"  # its workers log per rank themselves
        lines += per_node_lines(spec)
    else:
        lines += per_task_lines(spec)
    lines += [
        'cd "$HPCUI_JOB_FOLDER" || exit 1',
        *verify_lines(spec.verified),
        *(containers.env_lines(spec.image) if spec.image else ()),
        _RUN_NODE.replace("@COMMAND@", _command(spec, runner))
        .replace("@LOG_OUT@", log_name("${HPCUI_JOB_ID}", log_rank, "stdout"))
        .replace("@LOG_ERR@", log_name("${HPCUI_JOB_ID}", log_rank, "stderr")),
        'if [ "${1:-}" = --node ]; then  # a sister node, started by the first one',
        *(f"  {s}" for s in spec.setup),
        "  run_node; exit $?",
        "fi",
        _JOB_ID,
        'export HPCUI_JOB_ID HPCUI_JOB_START="$(date +%s)"  # the walltime counts from here',
        f'exec >>"$HPCUI_JOB_FOLDER/{log_name("${HPCUI_JOB_ID}", "0", "stdout")}" '
        f'2>>"$HPCUI_JOB_FOLDER/{log_name("${HPCUI_JOB_ID}", "0", "stderr")}"',
        *spec.setup,
        *(
            (f"touch {quote(spec.env_folder + '/.hpcui-used')} 2>/dev/null || true",)
            if spec.env_folder
            else ()
        ),  # its environment's last use: `hpcui env list`, clean
        *(containers.conf_lines(spec.image, spec.folder) if spec.image else ()),
        *_chain_start(spec),
        f'[ -z "$pkl" ] || ln -sf "$pkl" "$HPCUI_JOB_FOLDER/{submitted_name("${HPCUI_JOB_ID}")}"',
        _LAUNCH if not spec.chain else _LAUNCH.removesuffix("exit $rc"),
        *(
            [chain.cancel_rest('"$HPCUI_JOB_FOLDER"', "${PBS_JOBID}", "qdel"), "exit $rc"]
            if spec.chain
            else []
        ),
        "",
    ]
    return "\n".join(lines)


def _chain_start(spec: BatchSpec) -> list[str]:
    """A chain's segment (backends/chain.py): leave when an earlier one finished the work,
    else run the last checkpoint's call if a Checkpointable left one."""
    if not spec.chain:
        return []
    folder = '"$HPCUI_JOB_FOLDER"'
    return [
        chain.skip_if_done(folder),
        f"export {chain.ENV}=1",
        f'[ -z "$pkl" ] || pkl={chain.call_pickle(folder, pickle_name())}',
    ]


def chain_submit_command(submit: Sequence[str], segments: int, after_ok: Sequence[str] = ()) -> str:
    """`segments` qsub calls in one shell command, each after the one before (afterany;
    backends/chain.py); `submit` is the dialect's qsub command line, the script last.
    The command line's depend= replaces the script's, so `after_ok` is said again."""
    ok = f"afterok:{':'.join(to_pbs_id(j) for j in after_ok)}," if after_ok else ""
    *head, script = submit
    return chain.submit_command(
        submit,
        lambda prev: [*head, "-W", f"depend={ok}afterany:{prev}", script],
        segments,
        cancel="qdel",
    )


# --- commands ----------------------------------------------------------------------------


def qsub_command(script_path: str) -> list[str]:
    """``qsub SCRIPT``: prints ``1234.server`` (arrays ``1234[].server``)."""
    return ["qsub", script_path]


def probe_command() -> str:
    """``qstat --version``, and ``qsub --help`` only when that does not decide (one call)."""
    return (
        'v=$(qstat --version 2>&1); printf "%s\\n" "$v"; '
        'case "$v" in *pbs_version*|*[Vv]ersion:*) ;; '
        "*) echo __HPCUI_QSUB__; qsub --help 2>&1 </dev/null;; esac; true"
    )


def split_probe(text: str) -> tuple[str, str | None]:
    """The probe's output as (qstat --version text, qsub --help text or None)."""
    head, sep, tail = text.partition("__HPCUI_QSUB__")
    return head, tail if sep else None


def _status_ids(job_ids: Sequence[str]) -> list[str]:
    """The ids one qstat needs: array elements collapse onto their parent (``-t`` expands)."""
    return sorted({array_parent(j) or to_pbs_id(j) for j in job_ids})


#: one job's (or array's, with its subjobs) record as JSON, history included
QSTAT_JSON = ("qstat", "-x", "-t", "-f", "-F", "json")
#: OpenPBS 23.06's qstat prints only the FIRST operand's jobs with ``-F json``: the JSON
#: "Jobs" object is made while the first operand is shown and not again (display_statjob
#: in src/cmds/qstat.c; ``qstat -f -F json 4.s 5.s`` lists 4.s alone, `-f` text lists both;
#: found on the dev cluster's OpenPBS). So several ids are one qstat each, in ONE
#: round trip, each printing a JSON document of its own (parse_qstat_json reads them all).
_EACH = 'for j in {ids}; do qstat -x -t -f -F json "$j"; done'
#: every id of $ids in one text qstat (xargs splits a list too long for one command);
#: where that prints nothing (a qstat that refuses text), one JSON qstat per id
_TEXT_OR_EACH = (
    'out=$(printf "%s\\n" $ids | xargs qstat -x -t -f 2>/dev/null); '
    'if [ -n "$out" ]; then printf "%s\\n" "$out"; else ' + _EACH.format(ids="$ids") + "; fi;"
)


def status_command(job_ids: Sequence[str], dialect: PbsDialect = "pbspro") -> list[str] | str:
    """ONE round trip for all jobs. PBS Pro: ``qstat -x`` lists queued and running jobs as
    well as finished ones (when the server keeps history), so no second call is needed;
    Torque keeps finished jobs as ``C`` for keep_completed seconds and has no JSON."""
    ids = _status_ids(job_ids)
    if dialect == "torque":
        return ["qstat", "-f", "-t", *ids]
    if len(ids) == 1:
        return [*QSTAT_JSON, *ids]
    return _EACH.format(ids=" ".join(quote(i) for i in ids))


#: what `--estimate` says on PBS Pro and Torque (a queued job may carry the server's
#: `estimated.start_time`, which `show` gives as its expected start)
NO_ESTIMATE = (
    "PBS gives no start estimate before a job is queued (qsub has no test submit); once "
    "queued, `hpcui show` has the server's estimate if it keeps one"
)


def find_token_command(dialect: PbsDialect = "pbspro") -> str:
    """The user's jobs (with history where there is some) with their Variable_List."""
    if dialect == "torque":
        return 'ids=$(qselect -u "$(id -un)"); [ -z "$ids" ] || qstat -f $ids'
    # as text, every id in one qstat (one JSON qstat per id took 75 s for 360 jobs of
    # history, after a dropped submit): parse_find_token reads the text blocks
    return (
        'u=$(id -un); ids=$(qselect -x -u "$u" 2>/dev/null || qselect -u "$u"); '
        '[ -z "$ids" ] || { ' + _TEXT_OR_EACH + " }"
    )


def parse_find_token(text: str, token: str, dialect: PbsDialect = "pbspro") -> str | None:
    """hpcui's base id of the job whose Variable_List carries ``HPCUI_TOKEN=token``: from
    `qstat -f` text blocks (both dialects now), or PBS Pro's JSON."""
    if dialect == "torque" or text.lstrip().startswith("Job Id:"):
        for block in re.split(r"^(?=Job Id:)", text, flags=re.M)[1:]:
            flat = block.replace("\n\t", "")
            if re.search(rf"\b{TOKEN_VAR}={re.escape(token)}\b", flat):
                return base_id(block.partition("\n")[0][len("Job Id:") :].strip())
        return None
    from hpcui.backends.pbs.status import json_jobs  # lenient: PBS prints invalid JSON at times

    for job_id, attrs in json_jobs(text).items():
        variables = attrs.get("Variable_List") if isinstance(attrs, dict) else None
        if isinstance(variables, dict) and str(variables.get(TOKEN_VAR)) == token:
            return base_id(job_id)
    return None


#: qsub's refusals (OpenPBS 23.06's words, tests/fixtures/openpbs-23.06) -> what to change
_QSUB_ADVICE = (
    ("Unknown queue", "That queue does not exist on the server: `hpcui partitions` lists "
     "its queues; pick one with partition=... (or fix the profile's partitions)."),
    ("violates queue and/or server resource limits", "The request is over a limit of the "
     "queue or the server (walltime, ngpus, ncpus, mem): ask for less, or another queue "
     "(`qstat -Qf QUEUE` on the login node shows its resources_max)."),
    ("Illegal attribute or resource value", "A resource value is malformed (a select "
     "chunk, a walltime, a size): check extra=[...] and the resources you passed."),
    ("Unknown resource", "The server does not know a resource of the request (e.g. ngpus "
     "where the site names GPUs otherwise): check the profile's gpu_directive."),
)  # fmt: skip


def qsub_advice(said: str) -> str:
    """What to change after qsub refused with `said` ("" when hpcui has no better word)."""
    return next((advice for words, advice in _QSUB_ADVICE if words in said), "")


def control_command(verb: str, job_ids: Sequence[str]) -> list[str]:
    """``qhold``/``qrls``/``qrerun`` with PBS's ids (verb: hold, release, requeue)."""
    tool = {"hold": "qhold", "release": "qrls", "requeue": "qrerun"}[verb]
    if not job_ids:
        raise ValueError("no job id given")
    return [tool, *(checked_pbs_id(j) for j in job_ids)]


def walltime_command(job_id: str, seconds: int) -> list[str]:
    return ["qalter", "-l", f"walltime={format_walltime(seconds)}", checked_pbs_id(job_id)]


def checked_pbs_id(job_id: str) -> str:
    """PBS's id for an hpcui id; ValueError (naming it) for anything that is not one."""
    pbs_id = to_pbs_id(job_id)
    parse_pbs_id(pbs_id)
    return pbs_id


def qdel_command(job_ids: Sequence[str]) -> list[str]:
    """``qdel`` with PBS's ids (array elements ``1234[7].server``)."""
    return ["qdel", *(to_pbs_id(j) for j in job_ids)]


#: qstat/qdel complaints about ids that are simply gone or over: not errors for hpcui
BENIGN_ERRORS = re.compile(
    r"Unknown Job Id|Job has finished|has already finished|Request invalid for state of job"
    r"|job_history|use -x",
    re.I,
)


def only_benign_errors(stderr: str) -> bool:
    """Whether every stderr line is about an unknown or finished job."""
    return all(BENIGN_ERRORS.search(line) for line in stderr.splitlines() if line.strip())
