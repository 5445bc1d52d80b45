"""Private keys from disk, locked or not, across paramiko versions.

paramiko 3.x names ``PKey.from_path``'s second parameter ``passphrase``, 4+ ``password``;
paramiko 5 raises a bare TypeError for a passphrase-protected key loaded without one (the
OpenSSH-format ed25519 keys ssh-keygen writes by default). Both become KeyLocked here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko


class KeyLocked(Exception):
    """The key file needs a passphrase (none was given, or paramiko asked for one)."""


class KeyUnreadable(Exception):
    """The key could not be loaded: wrong passphrase, not a key, unsupported type."""


def load_private_key(path: str, passphrase: bytes | None = None) -> paramiko.PKey:
    import paramiko

    try:
        return paramiko.PKey.from_path(path, passphrase)  # positional: both parameter names
    except paramiko.PasswordRequiredException as exc:
        raise KeyLocked(path) from exc
    except TypeError as exc:
        if passphrase is None and "password" in str(exc).lower():
            raise KeyLocked(path) from exc
        raise KeyUnreadable(str(exc)) from exc
    except (paramiko.SSHException, ValueError) as exc:
        raise KeyUnreadable(str(exc)) from exc
