"""Chains: one call run as up to N jobs in a row, past a site's longest time limit.

Every segment is an ordinary batch job of the SAME script in the SAME job folder; segment
k+1 waits for segment k with an ``afterany`` dependency, submitted with the first (so its
queue wait overlaps the run before it). A segment that reaches its limit (killed: no
result; or its callable returned after the early signal) leaves the rest to the next,
which resumes from the user's own checkpoint (or a Checkpointable's pickle:
``RESUME``). The segment that finishes the work (its callable returned before the limit,
or raised) writes ``DONE``; its batch script then cancels the segments after it (ids in
``IDS``), and any segment that still starts finds ``DONE`` and leaves at once. Shell
lines only, rendered for the Slurm and PBS scripts; the client reads the same files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hpcui.backends.shell import quote

#: exported by the batch script of a chain's segment: the node runner decides DONE
ENV = "HPCUI_CHAIN"
#: written by the segment that finished the work: its job id
DONE = "chain.done"
#: every segment's job id, one per line, in order (written by the submit)
IDS = "chain.ids"
#: a Checkpointable's checkpoint in a chain: the next segment's call
RESUME = "chain.resume.pkl"
#: the most segments one chain may have (each is a job in the queue)
MAX_SEGMENTS = 50


def skip_if_done(folder: str) -> str:
    """First thing a segment does: leave at once when an earlier one finished the work
    (its cancel of this segment did not reach the scheduler in time, or was refused)."""
    done = f"{folder}/{DONE}"
    return (
        f'if [ -e {done} ]; then echo "hpcui: segment skipped: an earlier segment of this '
        f'chain finished the work (job $(cat {done}))" >&2; exit 0; fi'
    )


def call_pickle(folder: str, task_pickle: str) -> str:
    """The call a segment runs: the last Checkpointable checkpoint, else the submitted one
    (a shell word for `ln -sf`; both names are relative to the job folder)."""
    return f'"$([ -e {folder}/{RESUME} ] && echo {RESUME} || echo {task_pickle})"'


def cancel_rest(folder: str, job_id: str, cancel: str) -> str:
    """After the tasks: where this segment finished the work, cancel the segments after
    it. `job_id` is a shell expression; `cancel` the scheduler's cancel command word.
    Never fails the job (a compute node may not be allowed to cancel: the client and
    `skip_if_done` cover that)."""
    ids = f"{folder}/{IDS}"
    return (
        f'if [ -e {folder}/{DONE} ] && [ -e {ids} ]; then rest=$(sed -n "/^{job_id}\\$/,\\$p" '
        f'{ids} | tail -n +2); [ -z "$rest" ] || {cancel} $rest >/dev/null 2>&1 || true; fi'
    )


def submit_command(
    first: Sequence[str],
    then: Callable[[str], Sequence[str]],
    segments: int,
    *,
    cancel: str,
    strip: str = "",
) -> str:
    """ONE shell command that submits `segments` jobs: `first`, then `then(PREVIOUS)`, where
    PREVIOUS stands for the previous segment's id, each waiting for the one before. Prints every id (one line each)
    only when all were accepted, and writes them to IDS; if one is refused, the ones
    already queued are cancelled, the refusal printed, and the command fails: a chain is
    submitted whole or not at all. `strip`: a shell suffix pattern cut from what the
    submit prints (`;*`: sbatch --parsable's `;cluster`)."""
    if not 1 <= segments <= MAX_SEGMENTS:
        raise ValueError(f"a chain has 1 to {MAX_SEGMENTS} segments, not {segments}")
    cut = f'; p="${{p%%{strip}}}"' if strip else ""
    lines = [
        "ids=''",
        "p=$(" + " ".join(quote(w) for w in first) + f") || exit $?{cut}",
        'ids="$p"',
    ]
    words = " ".join(_with_previous(quote(w)) for w in then(PREVIOUS))
    for _ in range(segments - 1):
        lines.append(f"p=$({words}) || {{ rc=$?; {cancel} $ids >/dev/null 2>&1; exit $rc; }}{cut}")
        lines.append('ids="$ids $p"')
    lines.append(f"printf '%s\\n' $ids > {IDS}.tmp && mv -f {IDS}.tmp {IDS} && printf '%s\\n' $ids")
    return "; ".join(lines)


#: stands for the previous segment's id in the words of `submit_command`'s `then`
PREVIOUS = "@PREVIOUS_ID@"


def _with_previous(word: str) -> str:
    """A quoted word with PREVIOUS made the shell's `$p` (closing and reopening quotes)."""
    return word.replace(PREVIOUS, "'\"$p\"'" if word.startswith("'") else '"$p"')


def parse_ids(stdout: str) -> list[str]:
    """The ids a chain's submit printed, in order (blank lines ignored)."""
    return [line.strip() for line in stdout.splitlines() if line.strip()]


def finished_work(result_head: bytes | None, limit_near: bool) -> bool:
    """Whether a segment finished the chain's work, from the first bytes of its task 0
    result (None: it left none: killed at the limit or checkpointed) and whether the early
    time-limit signal had come: an error ends the chain (a rerun would only repeat it); a
    return after the signal is a loop that stopped for the limit, so the next goes on."""
    if result_head is None:
        return False
    if b"success" not in result_head:
        return True
    return not limit_near
