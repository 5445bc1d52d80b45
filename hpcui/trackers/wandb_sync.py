"""W&B's offline runs, mirrored here, uploaded by W&B's own programs on this machine.

The node writes `offline-run-*/run-*.wandb` (W&B's transaction log) into the job's track
folder; the relay mirrors it byte for byte. `wandb sync` here reads the mirror and marks
what it uploaded (`run-*.wandb.synced` beside it), so a second sync uploads nothing: a run
is never uploaded twice. hpcui runs the program, in W&B's words when it fails (not logged
in: `wandb login`), and keeps the mirror either way. While the job runs, where W&B is
logged in here, W&B's `wandb beta sync --live` uploads each run as the mirror grows, so
the run's page updates live (`export_live`, a relay exporter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcui.errors import UsageError
from hpcui.store.registry import JobRecord
from hpcui.trackers.local_board import end

if TYPE_CHECKING:
    from hpcui.trackers.site import Site

#: W&B's marker of an uploaded transaction log (its `wandb sync` writes and honours it)
SYNCED = ".synced"


def offline_runs(local: Path) -> list[Path]:
    """The mirrored offline runs' folders, oldest first."""
    return sorted(p.parent for p in local.glob("wandb/offline-run-*/run-*.wandb"))


def is_synced(run: Path) -> bool:
    return any(run.glob(f"run-*.wandb{SYNCED}"))


def command(runs: list[Path], wandb: str = "wandb") -> list[str]:
    """The upload, as W&B documents it: `wandb sync RUN_DIR...`, already-synced runs skipped."""
    return [wandb, "sync", "--skip-synced", *map(str, runs)]


@dataclass
class Synced:
    command: list[str]
    runs: list[Path]
    output: str


def sync(local: Path, *, timeout: float = 1800) -> Synced | None:
    """Upload the mirror's runs not yet synced (None where there is none to upload)."""
    runs = [r for r in offline_runs(local) if not is_synced(r)]
    if not runs:
        return None
    wandb = shutil.which("wandb")
    if wandb is None:
        raise UsageError(
            "W&B's `wandb` is not installed here, so the mirrored runs stay unsynced in "
            f"{local}: `pip install wandb`, `wandb login`, then `hpcui track sync` again."
        )
    argv = command(runs, wandb)
    res = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    said = (res.stdout + res.stderr).strip()
    if res.returncode != 0:
        raise UsageError(
            f"`{' '.join(argv)}` failed (exit {res.returncode}); W&B said: {said[-800:]}. The "
            f"runs stay mirrored in {local}; `wandb login` if it asks, then `hpcui track sync`."
        )
    return Synced(argv, runs, said)


#: how long a live upload may go on after its job's last pass (its log complete, W&B's
#: own process should end by itself; `--live` may hang on a log a crash left unfinished)
GRACE_S = 120.0
#: W&B's live uploads this process started: run folder -> (process, when its job ended)
_live: dict[Path, list[Any]] = {}


def logged_in() -> bool:
    """W&B can upload from here: an API key in the environment or W&B's own netrc entry
    (`wandb login` writes it) for the host it talks to."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urllib.parse.urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return f"machine {host}" in (Path.home() / ".netrc").read_text()
    except OSError:
        return False


def live_command(run: Path, wandb: str = "wandb") -> list[str]:
    """W&B's own upload of a run still being written: it tails the mirror as it grows."""
    return [wandb, "beta", "sync", "--live", "--skip-synced", str(run)]


def live_log(run: Path) -> Path:
    return run.parent.parent / f".hpcui-wandb-live-{run.name}.log"


def export_live(cluster: Site, record: JobRecord, local: Path, ended: bool) -> None:
    """While the job runs, each mirrored offline run is uploaded live by W&B's own
    `wandb beta sync --live` (where W&B is logged in here and installed); once the job had
    its last pass, each gets GRACE_S to finish, then is ended (`hpcui track sync` then
    uploads what is left). Its words go to a log beside the mirror."""
    wandb = shutil.which("wandb")
    if wandb is None or not logged_in():
        return
    now = time.monotonic()
    for run in offline_runs(local):
        if is_synced(run) and run not in _live:
            continue
        if run not in _live:
            argv = live_command(run, wandb)
            log = live_log(run).open("w")
            log.write(" ".join(argv) + "\n")
            log.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    cwd=run.parent)  # fmt: skip
            _live[run] = [proc, None]
        proc, since = _live[run]
        if ended and since is None:
            _live[run][1] = since = now
        if proc.poll() is None and since is not None and now - since > GRACE_S:
            end(proc)
        if proc.poll() is not None and ended:
            del _live[run]


def end_live(local: Path) -> None:
    """End the live uploads of this mirror that this process started (the relay stops:
    `hpcui track sync` or the next relay uploads what is left, W&B skipping what it has)."""
    for run in [r for r in _live if r.is_relative_to(local)]:
        end(_live.pop(run)[0])


def live(run: Path) -> bool:
    """A live upload of this run is going on in this process."""
    entry = _live.get(run)
    return entry is not None and entry[0].poll() is None
