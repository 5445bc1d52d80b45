"""Who the server is and who we are: host keys checked against known_hosts, keys offered
and the keyboard-interactive login (2FA) done the way OpenSSH does them. A passphrase is
asked only when ssh-agent does not hold the key, and never kept."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from hpcui.errors import (
    AnswersRejected,
    AuthenticationError,
    ClusterConnectionError,
    ConnectionLost,
    HostKeyError,
    PromptNeededError,
)
from hpcui.transport.keys import KeyLocked, KeyUnreadable, load_private_key
from hpcui.transport.ssh.config import DEFAULT_IDENTITIES, SshTarget
from hpcui.transport.ssh.known_hosts import KnownHosts

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)

#: (title, instructions, [(prompt, echo)]) -> answers. Same shape as paramiko's handler.
PromptCallback = Callable[[str, str, list[tuple[str, bool]]], list[str]]
#: (host label, key type, SHA256 fingerprint) -> accept? Accepting writes known_hosts.
HostKeyCallback = Callable[[str, str, str], bool]


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint, as `ssh-keygen -l` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def verify_host_key(
    conn: paramiko.Transport,
    target: SshTarget,
    hosts: KnownHosts,
    *,
    trust_name: str,
    on_unknown_host: HostKeyCallback | None,
) -> None:
    """The server's key against known_hosts, as OpenSSH checks it: a revoked or changed key
    is always an error; an unknown one only with the callback's yes (then it is added)."""
    key = conn.get_remote_server_key()
    name, ktype, fp = target.known_hosts_name, key.get_name(), fingerprint(key)
    if hosts.is_revoked(key):
        raise HostKeyError(
            f"REVOKED host key for {name}: it offers {ktype} {fp}, which a @revoked line in "
            f"known_hosts marks as no longer trusted. Do not connect; ask your site for the "
            "server's current key.",
            host=name,
            fingerprint=fp,
            key_type=ktype,
        )
    known = hosts.keys
    if known.get(ktype) == key:
        return
    if known:
        raise HostKeyError(
            f"HOST KEY CHANGED for {name}: it now offers {ktype} {fp}, which does not match "
            f"known_hosts ({', '.join(target.known_hosts)}). This can mean an attack or a "
            "reinstalled server. Confirm the new fingerprint with your site, then remove the old "
            f"entry with `ssh-keygen -R '{name}'` and connect again.",
            host=name,
            fingerprint=fp,
            key_type=ktype,
        )
    ask = on_unknown_host
    for_caller = getattr(ask, "for_caller", None)  # the agent's: asks the calling client
    ask = for_caller() if for_caller is not None else ask
    if ask is not None and ask(name, ktype, fp):
        add_known_host(target.known_hosts[0], name, key)
        return
    ca = (
        " known_hosts trusts a @cert-authority for this host, but hpcui cannot check host "
        "certificates; it needs the host's own key."
        if hosts.cert_authority
        else ""
    )
    raise HostKeyError(
        f"Unknown host key for {name}: the server offers {ktype} {fp}, and it is not in "
        f"known_hosts ({', '.join(target.known_hosts)}).{ca} Compare the fingerprint "
        f"with the one your site publishes; to accept it run `hpcui trust {trust_name}` "
        f"or `ssh {target.alias}` once and answer yes.",
        host=name,
        fingerprint=fp,
        key_type=ktype,
    )


def candidate_keys(
    target: SshTarget, prompt: PromptCallback | None
) -> tuple[list[tuple[str, paramiko.PKey]], list[str]]:
    """(label, key) to offer, in OpenSSH's order (identity files, then ssh-agent's keys; with
    IdentitiesOnly only the agent's keys of those files), and the passphrase-protected files
    skipped because no one can be asked."""
    import paramiko

    out: list[tuple[str, paramiko.PKey]] = []
    files = target.identity_files or tuple(os.path.expanduser(p) for p in DEFAULT_IDENTITIES)
    wanted_pub: set[bytes] = set()
    try:
        agent_keys = paramiko.Agent().get_keys()
    except Exception:  # pragma: no cover - broken agent socket
        agent_keys = ()
    in_agent = {k.asbytes() for k in agent_keys}
    locked: list[str] = []
    for path in files:
        if not os.path.exists(path):
            continue
        try:
            key = load_private_key(path)
        except KeyLocked:
            pub = pub_blob(path + ".pub") if os.path.exists(path + ".pub") else None
            if pub is not None:
                wanted_pub.add(pub)
            if pub is not None and pub in in_agent:
                continue  # ssh-agent holds it unlocked: no passphrase to ask
            if prompt is None:
                log.info("skipping passphrase-protected key %s (no prompt available)", path)
                locked.append(path)
                continue
            key = unlock(path, prompt)
        except (KeyUnreadable, OSError) as exc:
            log.info("cannot load key %s: %s", path, exc)
            continue
        out.append((path, key))
        wanted_pub.add(key.asbytes())
    for key in agent_keys:
        if not target.identities_only or key.asbytes() in wanted_pub:
            out.append(("agent", key))
    return out, locked


def unlock(path: str, prompt: PromptCallback) -> paramiko.PKey:
    """Ask for the key's passphrase (terminal or app dialog); it is never kept."""
    answer = prompt("Key passphrase", "", [(f"Passphrase for {path}: ", False)])
    try:
        return load_private_key(path, (answer[0] if answer else "").encode())
    except (KeyLocked, KeyUnreadable) as exc:
        raise AuthenticationError(
            f"Could not unlock {path}: the passphrase is wrong ({exc}). Try again, or "
            f"load the key into ssh-agent once (`ssh-add {path}`)."
        ) from exc
    finally:
        del answer


def authenticate(
    conn: paramiko.Transport, target: SshTarget, prompt_now: Callable[[], PromptCallback | None]
) -> None:
    """Log in as OpenSSH does: `none` first to learn the methods, then public keys, then
    keyboard-interactive through the prompt (also as a second factor after a partial
    publickey success). `prompt_now()`: who can answer now (asked when needed)."""
    import paramiko

    user = target.user
    try:
        conn.auth_none(user)
        return
    except paramiko.BadAuthenticationType as exc:
        allowed = list(exc.allowed_types)
    except paramiko.SSHException as exc:
        raise ClusterConnectionError(f"SSH handshake with {target.label} failed: {exc}") from exc
    tried: list[str] = []
    locked: list[str] = []
    if "publickey" in allowed:
        keys, locked = candidate_keys(target, prompt_now())
        for label, key in keys:
            tried.append(label)
            try:
                remaining = conn.auth_publickey(user, key)
            except paramiko.BadAuthenticationType as exc:
                allowed = list(exc.allowed_types)
                break
            except paramiko.AuthenticationException:
                continue
            if conn.is_authenticated():
                return
            allowed = list(remaining)  # partial success: the server wants a second factor
            break
    if "keyboard-interactive" in allowed:
        prompt = prompt_now()
        if prompt is None:
            raise PromptNeededError(
                f"{target.label} asks for keyboard-interactive login (a password or 2FA "
                "code) and this session cannot prompt. Run interactively (the app or a terminal) "
                "to answer it."
            )
        try:
            conn.auth_interactive(user, prompt)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if not conn.is_active():  # the link died while we answered: not a refusal
                raise ConnectionLost(
                    f"Connection to {target.label} dropped during the "
                    "keyboard-interactive login; connecting again."
                ) from exc
            if not isinstance(exc, paramiko.AuthenticationException):
                raise
            said = str(exc).rstrip(". ") or "refused"
            raise AnswersRejected(
                f"{target.label} rejected the keyboard-interactive answers ({said}). "
                "Check the code (TOTP codes expire every 30 s) and try again."
            ) from exc
        if conn.is_authenticated():
            return
    if not conn.is_active():  # the link went away, the credentials were not refused
        raise ConnectionLost(
            f"Connection to {target.label} dropped during authentication (keys tried: "
            f"{', '.join(tried) or 'none'}). The next call reconnects."
        )
    if locked and not conn.is_authenticated():
        raise AuthenticationError(
            f"{target.label} needs your key, and {', '.join(locked)} is "
            "passphrase-protected while this session cannot ask for the passphrase. Load it "
            f"into ssh-agent (`ssh-add {locked[0]}`) or run interactively (the app or a "
            "terminal) to be asked."
        )
    raise AuthenticationError(
        f"{target.label} refused our credentials (server accepts: {', '.join(allowed)}; "
        f"keys tried: {', '.join(tried) or 'none found'}). Check IdentityFile/User in your ssh "
        "config, load your key into ssh-agent, or ask your site to register the public key."
    )


def add_known_host(path: str, name: str, key: paramiko.PKey) -> None:
    """Append a host key to known_hosts (what `ssh` does when you answer yes)."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    with open(path, "a", encoding="ascii") as fh:
        fh.write(f"{name} {key.get_name()} {key.get_base64()}\n")


def pub_blob(pub_path: str) -> bytes:
    with open(pub_path, encoding="ascii") as fh:
        return base64.b64decode(fh.read().split()[1])
