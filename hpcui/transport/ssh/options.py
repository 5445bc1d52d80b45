"""Read ssh_config(5) files as OpenSSH 9 does (readconf.c), without paramiko.

paramiko's SSHConfig differs from OpenSSH where it matters: Include pasted in place (the
lines after it joined the last included Host block), trailing ``# comments`` kept in
values, ``[]`` read as a pattern class, no ``Match final``/``canonical`` pass, the last
ProxyCommand/ProxyJump winning. Measured against ``ssh -G`` that sent about one
connection in four to another host, port, user, key or jump path.

What this reader follows (tests/unit/test_ssh_config_vs_openssh.py compares it with
``ssh -G`` over its configs):

- lines: keyword, then ``=`` or whitespace, then arguments split as ``argv_split`` does
  (double/single quotes, backslash escapes, a ``#`` that starts a word ends the line);
- ``Host`` patterns (``*``, ``?``, ``!``; case-sensitive, against the name as typed) and
  ``Match`` (all, canonical, final, host, originalhost, user, localuser, exec; ``!``);
  ``Match localnetwork``/``tagged`` are refused with a clear error;
- ``Match exec "CMD"`` runs CMD as ssh does, with ``$SHELL -c`` (stdin and stdout on
  /dev/null), its tokens expanded (%C %d %h %i %k %L %l %n %p %r %u) from what the
  files said so far, only when the criteria before it matched; exit status 0 matches,
  a signal is ssh's "match exec ... error". Decisions: it is bounded
  (MATCH_EXEC_TIMEOUT_S; ssh would wait for ever), its stderr is kept for the error
  message instead of reaching the terminal (the app owns it), a command is run once per
  resolution (both passes share the answer), and a host or user name with shell
  characters is refused before it reaches the shell (OpenSSH 9.6 bans them too);
- ``Include``: globbed, relative to ~/.ssh (/etc/ssh for the system file), each file
  read with the includer's Host/Match state, which is restored afterwards; an include in
  an inactive block reads nothing;
- the first value of a keyword wins; IdentityFile and CertificateFile accumulate;
  of ProxyCommand and ProxyJump the first wins, and ``none`` counts as a value (the one
  exception, as in OpenSSH 9: ``ProxyJump none`` does not hide a later ProxyCommand);
- a second, final pass when ``Match final`` was seen or CanonicalizeHostname is on, with
  the lowercased HostName as the host (hpcui does no DNS canonicalisation: a failed one).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import cast

from hpcui.errors import ConfigError

log = logging.getLogger(__name__)

MAX_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
#: how long a `Match exec` command may take (a VPN probe: `nc -z -w 1 gw 22`)
MATCH_EXEC_TIMEOUT_S = 10.0
#: what may not be in a name that a `Match exec` command line receives through a token
_SHELL_CHARS = re.compile(r"[\s'\"`;&|<>$\\(){}!*?\[\]~#^]")
ACCUMULATE = {"identityfile", "certificatefile", "localforward", "remoteforward",
              "dynamicforward", "sendenv", "setenv"}  # fmt: skip
UNSUPPORTED_MATCH = {
    "localnetwork": "depends on the local machine's network interfaces",
    "tagged": "depends on ssh -P / Tag",
}


def split_args(text: str, where: str) -> list[str]:
    """OpenSSH's ``argv_split(..., terminate_on_comment=1)``."""
    args: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t":
            i += 1
            continue
        if text[i] == "#":
            break
        quote = ""
        arg: list[str] = []
        while i < n:
            c = text[i]
            if (
                c == "\\"
                and i + 1 < n
                and (text[i + 1] in "'\"\\" or (not quote and text[i + 1] == " "))
            ):
                arg.append(text[i + 1])
                i += 2
                continue
            if not quote and c in " \t":
                break
            if not quote and c in "\"'":
                quote = c
            elif quote and c == quote:
                quote = ""
            else:
                arg.append(c)
            i += 1
        if quote:
            raise ConfigError(f"{where}: invalid quotes. Close the quote or remove it.")
        args.append("".join(arg))
    return args


def split_keyword(line: str) -> tuple[str, str] | None:
    """(lowercased keyword, the rest) as readconf's ``strdelim`` splits a line; None for a
    blank or comment line."""
    s = line.strip(" \t\r\n\f")
    if not s or s.startswith("#"):
        return None
    m = re.match(r'("[^"]*"|[^\s="]+)\s*(?:=\s*)?(.*)$', s, re.DOTALL)
    if m is None:
        return None
    keyword = m[1].strip('"').lower()
    if keyword.startswith("#"):
        return None
    return keyword, m[2]


@lru_cache(maxsize=512)
def _glob_re(pattern: str) -> re.Pattern[str]:
    """ssh's match_pattern: ``*`` and ``?`` only (no ``[]`` classes)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern), re.DOTALL)  # fmt: skip


def match_pattern(text: str, pattern: str) -> bool:
    return _glob_re(pattern).fullmatch(text) is not None


def match_pattern_list(text: str, patterns: str, *, lower: bool = False) -> bool:
    """ssh's match_pattern_list: comma-separated, ``!`` negates and vetoes."""
    if lower:
        text, patterns = text.lower(), patterns.lower()
    found = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if match_pattern(text, pattern[1:] if negated else pattern):
            if negated:
                return False
            found = True
    return found


@dataclass
class OptionsReader:
    """One resolution: the options found so far (first value wins) and the pass state."""

    original: str  # the host as typed: originalhost, %n
    local_user: str
    home: str
    options: dict[str, object] = field(default_factory=dict)
    final: bool = False
    want_final: bool = False
    host: str = ""  # what Host lines match: as typed, then (final pass) the final name
    #: `Match exec` answers of this resolution, by expanded command
    exec_answers: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.host = self.host or self.original

    # -- files ---------------------------------------------------------------------------

    def read_file(
        self, path: Path, *, user_conf: bool, active: bool = True, never: bool = False,
        depth: int = 0,
    ) -> None:  # fmt: skip
        if depth > MAX_DEPTH:
            raise ConfigError(f"ssh config Include nesting too deep at {path}: an Include loop?")
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ConfigError(f"Could not read ssh config {path}: {exc.strerror}.") from exc
        state = [active]
        for number, line in enumerate(text.splitlines(), 1):
            self._line(line, f"{path} line {number}", state, never, user_conf, depth)

    def _line(
        self, line: str, where: str, state: list[bool], never: bool, user_conf: bool, depth: int
    ) -> None:
        split = split_keyword(line)
        if split is None:
            return
        keyword, rest = split
        if not rest.strip():
            raise ConfigError(f'{where}: no argument after keyword "{keyword}".')
        if keyword == "proxycommand":  # the rest of the line, as it stands
            jump = self.options.get("proxyjump")
            if jump is None or str(jump).lower() == "none":  # a real jump hides it
                self._set("proxycommand", rest.strip(), state[0])
            return
        args = split_args(rest, where)
        if keyword == "host":
            state[0] = not never and self._host_matches(args)
        elif keyword == "match":
            state[0] = self._match(args, where) and not never
        elif keyword == "include":
            for pattern in args:
                for included in self._include_paths(pattern, user_conf):
                    self.read_file(
                        included, user_conf=user_conf, active=state[0],
                        never=never or not state[0], depth=depth + 1,
                    )  # fmt: skip
        elif keyword == "proxyjump":
            if state[0]:
                _check_jump(args[0], where)
            if "proxycommand" not in self.options:  # any ProxyCommand, even none, hides it
                self._set("proxyjump", args[0], state[0])
        elif keyword in ACCUMULATE:
            if state[0]:
                values = cast(list[str], self.options.setdefault(keyword, []))  # ACCUMULATE: lists
                for arg in args if keyword in ("sendenv", "setenv") else args[:1]:
                    if keyword not in ("identityfile", "certificatefile") or arg not in values:
                        values.append(arg)  # ssh registers a key file once
        else:
            self._set(keyword, args, state[0])

    def _set(self, key: str, value: object, active: bool) -> None:
        if active and key not in self.options:
            self.options[key] = value

    def _include_paths(self, pattern: str, user_conf: bool) -> list[Path]:
        if pattern.startswith("~"):
            pattern = self.home + pattern[1:] if pattern[1:2] in ("", "/") else pattern
        if not os.path.isabs(pattern):
            base = os.path.join(self.home, ".ssh") if user_conf else "/etc/ssh"
            pattern = os.path.join(base, pattern)
        return [Path(p) for p in sorted(glob.glob(pattern)) if os.path.isfile(p)]

    # -- Host and Match ---------------------------------------------------------------------

    def _host_matches(self, patterns: Iterable[str]) -> bool:
        positive = False
        for pattern in patterns:
            if pattern.startswith("!"):
                if match_pattern(self.host, pattern[1:]):
                    return False
            elif match_pattern(self.host, pattern):
                positive = True
        return positive

    def _match(self, words: list[str], where: str) -> bool:
        if not words:
            raise ConfigError(f"{where}: Match needs criteria (e.g. Match host NAME).")
        result = True
        i = 0
        while i < len(words):
            word = words[i]
            negate = word.startswith("!")
            attrib = (word[1:] if negate else word).lower()
            i += 1
            if attrib == "all":
                if len(words) > 1 and not {w.lstrip("!").lower() for w in words} <= {
                    "all", "canonical", "final"
                }:  # fmt: skip
                    raise ConfigError(f"{where}: Match all must stand alone.")
                result = result and not negate
                continue
            if attrib in ("canonical", "final"):
                if attrib == "final":
                    self.want_final = True
                if self.final == negate:
                    result = False
                continue
            if i >= len(words):
                raise ConfigError(f"{where}: Match {attrib} needs a value.")
            value = words[i]
            i += 1
            if attrib == "exec":
                command = self._exec_command(value, where)  # a bad token fails even if skipped
                if not result:  # ssh skips an exec once an earlier criterion failed
                    continue
                matched = self._exec(command, where)
                if matched == negate:
                    result = False
                continue
            if attrib in UNSUPPORTED_MATCH:
                if result:  # ssh skips an exec once an earlier criterion failed
                    raise ConfigError(
                        f"{where}: `Match {attrib}` {UNSUPPORTED_MATCH[attrib]}, which hpcui "
                        "cannot follow. Give this cluster its own Host block (or set host, "
                        "user and port in hpcui's config) so that it does not depend on it."
                    )
                continue
            if attrib == "host":
                matched = match_pattern_list(self._match_host(), value, lower=True)
            elif attrib == "originalhost":
                matched = match_pattern_list(self.original, value, lower=True)
            elif attrib == "user":
                matched = match_pattern_list(str(self._first("user") or self.local_user), value)
            elif attrib == "localuser":
                matched = match_pattern_list(self.local_user, value)
            else:
                raise ConfigError(f"{where}: unsupported Match attribute {attrib!r}.")
            if matched == negate:
                result = False
        return result

    def _exec_command(self, template: str, where: str) -> str:
        host = self._match_host()
        user = str(self._first("user") or self.local_user)
        alias = self._first("hostkeyalias") or host
        for what, name in (("host", host), ("host as typed", self.original), ("user", user),
                           ("HostKeyAlias", alias)):  # fmt: skip
            if _SHELL_CHARS.search(name):
                raise ConfigError(
                    f"{where}: `Match exec` would hand the {what} {name!r} to a shell, and it "
                    "holds characters a shell reads; use a plain name."
                )
        port = self._first("port") or "22"
        if not port.isdigit():
            raise ConfigError(f"{where}: Port {port!r} is not a number.")
        tokens = path_tokens(
            self.original, host, int(port), user, alias,
            self.local_user, self.home,
        )  # fmt: skip
        return percent_expand(template, tokens, "Match exec")

    def _exec(self, command: str, where: str) -> bool:
        if command not in self.exec_answers:
            self.exec_answers[command] = run_match_exec(command, where)
        return self.exec_answers[command]

    def _first(self, key: str) -> str | None:
        value = self.options.get(key)
        return value[0] if isinstance(value, list) and value else None

    def _match_host(self) -> str:
        hostname = self._first("hostname")
        if self.final:
            return self.host
        return expand_hostname(hostname, self.original) if hostname else self.original


def run_match_exec(command: str, where: str) -> bool:
    """ssh's execute_in_shell: True when the command exits 0 (see the module's doc)."""
    shell = os.environ.get("SHELL") or "/bin/sh"
    if not os.access(shell, os.X_OK):
        raise ConfigError(
            f'{where}: Shell "{shell}" is not executable, so `Match exec` cannot run (as ssh '
            "says); set SHELL to your shell."
        )
    try:
        proc = subprocess.Popen(
            [shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a timeout ends the command and what it started
        )
    except OSError as exc:
        raise ConfigError(f"{where}: match exec '{command}' could not start: {exc}.") from None
    try:
        _, err = proc.communicate(timeout=MATCH_EXEC_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ConfigError(
            f"{where}: match exec '{command}' did not finish in {MATCH_EXEC_TIMEOUT_S:g} s "
            "(ssh would wait for it). Make the command end sooner (e.g. `nc -z -w 1 ...`)."
        ) from None
    said = err.decode(errors="replace").strip()
    if proc.returncode < 0:
        raise ConfigError(
            f"{where}: match exec '{command}' error: it exited abnormally "
            f"(signal {-proc.returncode}){': ' + said if said else ''}."
        )
    log.debug("match exec %r: exit status %d %s", command, proc.returncode, said)
    return proc.returncode == 0


def path_tokens(
    original: str,
    hostname: str,
    port: int,
    user: str,
    alias: str | None,
    local_user: str,
    home: str,
) -> dict[str, str]:
    """ssh's percent tokens (ssh_config(5) TOKENS) for file paths and `Match exec`."""
    long_name = socket.gethostname()
    short_name = long_name.split(".", 1)[0]
    return {
        "C": hashlib.sha1(f"{long_name}{hostname}{port}{user}".encode()).hexdigest(),
        "d": home,
        "h": hostname,
        "i": str(os.getuid()),
        "k": alias or original,
        "L": short_name,
        "l": long_name,
        "n": original,
        "p": str(port),
        "r": user,
        "u": local_user,
    }


def expand_hostname(template: str, host: str) -> str:
    """HostName's only tokens: %h (the name typed) and %%."""
    return percent_expand(template, {"h": host}, "HostName")


def percent_expand(template: str, tokens: dict[str, str], what: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(template):
        c = template[i]
        if c == "%":
            key = template[i + 1 : i + 2]
            if key == "%":
                out.append("%")
            elif key in tokens:
                out.append(tokens[key])
            else:
                raise ConfigError(
                    f"ssh config: {what} {template!r} uses %{key}, which is not defined there."
                )
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def env_expand(template: str, what: str) -> str:
    """``${VAR}`` from the environment; an unset one is an error, as in ssh."""

    def value(m: re.Match[str]) -> str:
        if m[1] not in os.environ:
            raise ConfigError(
                f"ssh config: {what} {template!r} uses ${{{m[1]}}}, which is not set."
            )
        return os.environ[m[1]]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value, template)


def _check_jump(spec: str, where: str) -> None:
    if spec.lower() == "none":
        return
    for hop in spec.split(","):
        hop = hop.removeprefix("ssh://")
        host = hop.rpartition("@")[2]
        if not host or host.startswith("-") or any(c in host for c in " '\"`;|&$"):
            raise ConfigError(f"{where}: ProxyJump hop {hop!r} is not a [user@]host[:port].")
