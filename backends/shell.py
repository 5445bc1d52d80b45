"""POSIX shell quoting for text that lands in generated scripts."""

from __future__ import annotations

import shlex


def quote(value: str) -> str:
    """Quote one word for sh/bash; safe for any text without NUL."""
    if "\0" in value:
        raise ValueError("a NUL byte cannot travel through a shell word")
    return shlex.quote(value)


#: what a script preview shows for the bundle's hash (it changes with every hpcui build)
PREVIEW_DIGEST = "BUNDLE_SHA256"


def verify_lines(files: tuple[tuple[str, str], ...]) -> list[str]:
    """Shell lines that stop the job unless each (path, sha256) holds exactly those bytes.

    The runtime bundle is code every job imports: a file swapped by someone who can write
    where it lives would run as the job's owner. Checked on the node, before use.
    """
    lines = []
    for path, digest in files:
        hexdigest = all(c in "0123456789abcdef" for c in digest) and len(digest) == 64
        if not hexdigest and digest != PREVIEW_DIGEST:
            raise ValueError(f"not a SHA-256 digest: {digest!r}")
        lines.append(
            f"printf '%s  %s\\n' {digest} {quote(path)} | sha256sum -c --status - 2>/dev/null || "
            f"{{ echo 'hpcui: '{quote(path)}' is not the file hpcui uploaded (its SHA-256 "
            "differs): not running it. Someone else may write where it lives; see "
            "docs/decisions/shared-remote-base.md.' >&2; exit 97; }"
        )
    return lines


#: a job's first line: the logs were made under umask 077 (private: a service's token may
#: be in them); the user's code runs with the umask the user has (the submit passes it)
UMASK_BACK = '[ -z "${HPCUI_UMASK:-}" ] || umask "$HPCUI_UMASK"'
