"""When a request would start, in Slurm's own words: ``sbatch --test-only`` per candidate
partition, all in one round trip. Pure: the command text and its parser."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

from hpcui.backends.records import StartEstimate
from hpcui.backends.shell import quote
from hpcui.backends.slurm.fields import parse_timestamp

#: ends each partition's answer: `__HPCUI_ESTIMATE_END__ PARTITION`
END = "__HPCUI_ESTIMATE_END__"
#: sbatch's line (src/sbatch/sbatch.c, 20.11 to 24.x): "sbatch: Job 4248 to start at
#: 2026-11-27T21:16:39 using 4 processors on nodes node1 in partition gpu"
_LINE = re.compile(
    r"Job \S+ to start at (\S+) using (\d+) processors on nodes (\S+) in partition (\S+)"
)


def estimate_command(scripts: Mapping[str, str]) -> str:
    """Shell code: each script (keyed by the partition it asks) through `sbatch
    --test-only`, its answer (stderr) and then an END line; the scripts travel base64'd
    (no quoting of their text, no heredoc in the shell channel)."""
    parts = []
    for partition, script in scripts.items():
        body = base64.b64encode(script.encode()).decode()
        parts.append(
            f"printf %s {body} | base64 -d | sbatch --test-only 2>&1; "
            f"echo {END} {quote(partition or '-')}"
        )
    return "; ".join(parts)


def parse_test_only(text: str) -> list[StartEstimate]:
    """`estimate_command`'s answers, one per partition, in its order."""
    out = []
    answer: list[str] = []
    for line in text.splitlines():
        if line.startswith(END + " "):
            out.append(_estimate(line[len(END) + 1 :].strip(), "\n".join(answer)))
            answer = []
        else:
            answer.append(line)
    return out


def _estimate(partition: str, said: str) -> StartEstimate:
    partition = "" if partition == "-" else partition
    m = _LINE.search(said)
    if m is None:  # refused: sbatch's own words ("invalid partition", "QOSMaxWall...")
        error = next((ln for ln in said.splitlines() if "error" in ln.lower()), said.strip())
        words = error.removeprefix("sbatch: error: ").strip() or "no answer"
        return StartEstimate(partition=partition, said=f"Slurm would not queue it: {words}")
    when = parse_timestamp(m[1])
    return StartEstimate(
        partition=m[4] or partition,
        start=when,
        nodes=m[3],
        said=re.sub(r"^(sbatch: )?Job \S+ ", "", said.strip()),
    )
