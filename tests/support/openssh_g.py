"""OpenSSH's own answer for a host: ``ssh -G``, run where it can reach nothing.

Each case's files live in its own home folder; ``ssh`` takes ``~`` from the passwd entry,
so the case runs in a private mount namespace whose /etc/passwd gives this user that
home, and in an empty network namespace (``ssh -G`` needs no network; a canonicalising
config would otherwise try DNS). Needs root (unshare), as the dev cluster does.
"""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from pathlib import Path


def write_case(home: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = home / ".ssh" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def ssh_g(
    home: Path, config: Path, hosts: list[str], env: dict[str, str], *, limit_s: float = 30.0
) -> list[dict]:
    """``ssh -G -F config HOST`` for each host: {key: [values...]} or {"error": text}; one
    that runs past `limit_s` (a `Match exec` that hangs) is stopped: an error."""
    me = pwd.getpwuid(os.getuid())
    passwd = home.parent / f"{home.name}.passwd"
    lines = []
    for line in Path("/etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) == 7 and fields[0] == me.pw_name:
            fields[5] = str(home)
        lines.append(":".join(fields))
    passwd.write_text("\n".join(lines) + "\n")
    out = home.parent / f"{home.name}.out"
    out.mkdir(exist_ok=True)
    script = [f"mount --bind {shlex.quote(str(passwd))} /etc/passwd || exit 99"]
    for i, host in enumerate(hosts):
        script.append(
            f"timeout -s KILL {limit_s:g} ssh -G -F {shlex.quote(str(config))} {shlex.quote(host)} "
            f"> {out}/{i}.out 2> {out}/{i}.err < /dev/null"
        )
    done = subprocess.run(
        ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", "\n".join(script)],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode == 99:
        raise RuntimeError(f"could not set up the namespace: {done.stderr}")
    answers = []
    for i in range(len(hosts)):
        text = (out / f"{i}.out").read_text()
        if not text:
            answers.append({"error": (out / f"{i}.err").read_text().strip() or "no answer"})
            continue
        options: dict[str, list[str]] = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            options.setdefault(key, []).append(value)
        answers.append(options)
    return answers
