"""Capture real OpenPBS 23.06 outputs from the dev cluster's PBS site, verbatim, as fixtures.

Usage (the dev cluster up, as root, from the repository root):
    python3 scripts/capture_pbs_fixtures.py tests/fixtures/openpbs-23.06

Submits plain shell jobs as hpcuser on the PBS login node (ssh through the dev cluster's
client config), puts them in every state hpcui reads - queued, running, held, finished,
failed, an array's parent and subjobs - and writes what qstat, pbsnodes and a refused
qsub printed, unedited, one file each, with COMMANDS.md naming the command behind each
file. Taking a host offline is a manager's act: it runs as root on pbs-head.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import devcluster_pbs as site

REPO = Path(__file__).resolve().parent.parent
SSH = ["ssh", "-F", str(REPO / ".devcluster/ssh/config"), "hpcui-pbs"]


def user(cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SSH, cmd], capture_output=True, text=True, timeout=120)


def qsub(args: str, body: str = "sleep 60") -> str:
    res = user(f"cd /tmp && echo {body!r} | qsub {args}")
    if res.returncode != 0:
        raise SystemExit(f"qsub {args}: {res.stderr}")
    return res.stdout.strip()


def state(job: str) -> str:
    out = user(f"qstat -x -f {job}").stdout
    return next((ln.split("=", 1)[1].strip() for ln in out.splitlines() if "job_state" in ln), "")


def wait(job: str, want: str, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while state(job) != want:
        if time.monotonic() > end:
            raise SystemExit(f"{job} never reached {want} (is {state(job)!r})")
        time.sleep(1)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []

    def keep(name: str, cmd: str, *, as_root: bool = False, expect_fail: bool = False) -> None:
        if as_root:
            res = site.run_on(
                site.HEAD, ["sh", "-c", cmd], env=site._pbs_env(site.CONF), check=False
            )
        else:
            res = user(cmd)
        if (res.returncode != 0) != expect_fail:
            raise SystemExit(f"{cmd}: rc {res.returncode}: {res.stderr}")
        (out / name).write_text(res.stdout + res.stderr if expect_fail else res.stdout)
        who = "root on pbs-head" if as_root else "hpcuser on the login node (pbs-head)"
        notes.append(f"| `{name}` | `{cmd}` | {who} |")

    blocker = qsub(
        "-N fx-blocker -l select=2:ncpus=1:ngpus=4 -l place=scatter -l walltime=00:05:00"
    )
    wait(blocker, "R")
    queued = qsub("-N fx-queued -l select=1:ncpus=1:ngpus=1 -l walltime=00:05:00")
    held = qsub("-h -N fx-held -l walltime=00:05:00")
    done = qsub("-N fx-done -l walltime=00:05:00", "echo done")
    failed = qsub("-N fx-failed -l walltime=00:05:00", "exit 3")
    array = qsub("-N fx-array -J 0-3 -l select=1:ncpus=1 -l walltime=00:05:00", "sleep 20")
    time.sleep(4)
    keep("qstat_f_json_queued.json", f"qstat -f -F json {queued}")
    keep("qstat_f_json_running.json", f"qstat -f -F json {blocker}")
    keep("qstat_f_json_held.json", f"qstat -f -F json {held}")
    keep("qstat_t_f_json_array.json", f"qstat -x -t -f -F json '{array}'")
    keep("qstat_f_json_two_ids.json", f"qstat -x -f -F json {queued} {held}")
    keep("pbsnodes_a_json_busy.json", "pbsnodes -a -F json")
    keep("qstat_Q.txt", "qstat -Q")
    keep("qstat_Bf_json.json", "qstat -Bf -F json")
    wait(done, "F")
    wait(failed, "F")
    keep("qstat_x_f_json_finished.json", f"qstat -x -f -F json {done}")
    keep("qstat_x_f_json_failed.json", f"qstat -x -f -F json {failed}")
    user(f"qdel {blocker} {queued} {held}; qdel '{array}'")
    time.sleep(3)
    keep("qstat_x_f_json_deleted.json", f"qstat -x -f -F json {blocker}")
    keep("qstat_x.txt", "qstat -x")
    keep("pbsnodes_a_json_offline.json",
         "pbsnodes -o -C 'fixture' pbs-n2 && pbsnodes -a -F json; pbsnodes -r -C '' pbs-n2",
         as_root=True)  # fmt: skip
    keep("qsub_unknown_queue.txt", "cd /tmp && echo true | qsub -q nosuch", expect_fail=True)
    keep("qsub_too_many_ngpus.txt",
         "cd /tmp && echo true | qsub -q ai -l select=3:ngpus=4 -l walltime=00:05:00",
         expect_fail=True)  # fmt: skip
    keep("qsub_bad_select.txt", "cd /tmp && echo true | qsub -l select=two:ncpus=1",
         expect_fail=True)  # fmt: skip
    keep("qsub_walltime_over_queue.txt",
         "cd /tmp && echo true | qsub -q ai -l walltime=13:00:00", expect_fail=True)  # fmt: skip
    (out / "COMMANDS.md").write_text(
        "# OpenPBS 23.06.06, captured verbatim on hpcui's dev cluster PBS site\n\n"
        "Written by `scripts/capture_pbs_fixtures.py` (the dev cluster up: "
        "`scripts/devcluster up`): OpenPBS built from `../shared/vendor/openpbs-cd7ab5edaf03.tar.xz`,"
        " server `pbs-head`, moms `pbs-n1` and `pbs-n2` (4 ngpus, 8 ncpus each), queues "
        "`normal` (default, 24 h) and `ai` (12 h, at most 8 ngpus). A refused qsub's file holds "
        "its stderr.\n\n| file | command | run as |\n|---|---|---|\n" + "\n".join(notes) + "\n"
    )
    print(f"wrote {len(notes)} fixtures to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
