"""known_hosts as OpenSSH reads it, for host-key verification.

paramiko's own loader stops at lines it cannot parse, and a ``@cert-authority`` or
``@revoked`` line (OpenSSH honours both) made every host unverifiable. Here each line is
read on its own: plain keys for the host, ``@revoked`` keys (refused even when listed as
known), and whether a ``@cert-authority`` covers the host (hpcui cannot check host
certificates: paramiko does not, so it says so instead of failing obscurely). Host
patterns follow OpenSSH: hashed names (``|1|salt|hash``), ``*``/``?`` wildcards and
``!`` negation, ``[host]:port`` for non-default ports.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)


@dataclass
class KnownHosts:
    """What known_hosts says about one host name."""

    keys: dict[str, paramiko.PKey] = field(default_factory=dict)  # key type -> key
    revoked: list[paramiko.PKey] = field(default_factory=list)
    cert_authority: bool = False  # a @cert-authority line covers this host
    skipped: int = 0  # lines that could not be read (logged, never fatal)

    def is_revoked(self, key: paramiko.PKey) -> bool:
        blob = key.asbytes()
        return any(r.asbytes() == blob for r in self.revoked)


def _hashed_match(pattern: str, name: str) -> bool:
    try:
        _, magic, salt, digest = pattern.split("|")
        if magic != "1":
            return False
        mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(mac, base64.b64decode(digest))
    except ValueError:
        return False


def _glob(pattern: str, name: str) -> bool:
    """OpenSSH wildcards: only `*` and `?` (a `[` is literal: `[host]:port`)."""
    rx = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(rx, name) is not None


def host_matches(patterns: str, name: str) -> bool:
    """OpenSSH's match of a comma-separated pattern list: any positive match and no
    negated one (``!pattern``). Hashed entries compare the salted HMAC."""
    hit = False
    for pattern in patterns.split(","):
        if pattern.startswith("|"):
            hit |= _hashed_match(pattern, name)
        elif pattern.startswith("!"):
            if _glob(pattern[1:], name):
                return False
        elif _glob(pattern, name):
            hit = True
    return hit


def _key(keytype: str, b64: str) -> paramiko.PKey | None:
    import paramiko

    try:
        return paramiko.PKey.from_type_string(keytype, base64.b64decode(b64))
    except Exception:  # unknown key type, bad base64: OpenSSH skips such a line too
        return None


def read_known_hosts(paths: Iterable[str], name: str) -> KnownHosts:
    """Everything the files say about `name` (as known_hosts stores it, e.g.
    ``[127.0.0.1]:2222``); unreadable files and lines are skipped, never fatal."""
    out = KnownHosts()
    for path in paths:
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError as exc:
            log.info("cannot read %s: %s", path, exc)
            continue
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            marker = fields.pop(0) if fields[0].startswith("@") else None
            if len(fields) < 3 or marker not in (None, "@revoked", "@cert-authority"):
                out.skipped += 1
                log.info("%s:%d: skipped an unreadable known_hosts line", path, number)
                continue
            patterns, keytype, b64 = fields[:3]
            if not host_matches(patterns, name):
                continue
            if marker == "@cert-authority":
                out.cert_authority = True
                continue
            key = _key(keytype, b64)
            if key is None:
                out.skipped += 1
                log.info("%s:%d: skipped a key hpcui cannot read (%s)", path, number, keytype)
            elif marker == "@revoked":
                out.revoked.append(key)
            else:
                out.keys.setdefault(key.get_name(), key)
    return out
