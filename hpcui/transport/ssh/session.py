"""SSH transport: one paramiko connection per cluster and process, (re)connected with
backoff, through ProxyJump/ProxyCommand, watched by keepalives. Commands go through a pool
of framed shells (shells.py), files through SFTP or a plain channel (sftp.py); who the server
is and who we are is auth.py's business.

Over 500 lines: the connection, its reconnects with backoff, ProxyJump and ProxyCommand, the keepalive watch and the exec channels share one lock and one connection state; login (auth.py), shells (shells.py) and files (sftp.py) are apart already."""

from __future__ import annotations

import contextlib
import logging
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from hpcui.errors import (
    AuthenticationError,
    ClusterConnectionError,
    CommandTimeout,
    ConnectionLost,
    HostKeyError,
    UsageError,
)
from hpcui.transport import deadline
from hpcui.transport.base import Command, CommandResult, RemoteStat, Transport
from hpcui.transport.quoting import quote_argv, to_command
from hpcui.transport.ssh.auth import (
    HostKeyCallback,
    PromptCallback,
    authenticate,
    verify_host_key,
)
from hpcui.transport.ssh.config import SshTarget, parse_jump, resolve
from hpcui.transport.ssh.known_hosts import KnownHosts, read_known_hosts
from hpcui.transport.ssh.sftp import RemoteFiles
from hpcui.transport.ssh.shells import (
    LOGIN_SHELL,
    MAX_PACKET,
    PLAIN_SHELL,
    WINDOW_SIZE,
    ChannelStream,
    Shell,
    ShellPool,
)
from hpcui.transport.watchdog import Watchdog

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)
# paramiko logs a dropped socket at ERROR; with no handler Python would print it on the
# terminal (and over the app). hpcui reports drops itself, as ConnectionLost.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
_T = TypeVar("_T")

#: reply-expected keepalives (OpenSSH's ServerAliveInterval / ServerAliveCountMax): a link
#: silent for one interval is "stalled", for ALIVE_COUNT_MAX intervals dead and closed
ALIVE_INTERVAL_S = 5.0
ALIVE_COUNT_MAX = 3


class SshTransport(Transport):
    """One SSH connection shared by everything that talks to one cluster in this process."""

    def __init__(
        self,
        target: SshTarget,
        *,
        prompt: PromptCallback | None = None,
        on_unknown_host: HostKeyCallback | None = None,
        login_shell: bool = True,
        alive_interval: float | None = None,
        alive_count_max: int | None = None,
        reconnect_attempts: int = 3,
        command_timeout: float | None = 600.0,
        max_shells: int = 3,
        trust_name: str | None = None,
    ) -> None:
        self.target = target
        self.trust_name = trust_name or target.alias  # what `hpcui trust NAME` needs
        self.description = f"ssh {target.label}"
        self.prompt = prompt
        self.on_unknown_host = on_unknown_host
        self.login_shell = login_shell
        # argument, else the ssh config's ServerAlive* options, else hpcui's defaults
        self.alive_interval: float = next(
            v
            for v in (alive_interval, target.server_alive_interval, ALIVE_INTERVAL_S)
            if v is not None
        )
        self.alive_count_max: int = next(
            v
            for v in (alive_count_max, target.server_alive_count_max, ALIVE_COUNT_MAX)
            if v is not None
        )
        self._watchdog: Watchdog | None = None
        self._silent_for: float | None = None  # seconds the link has not answered
        self._stall_listeners: list[Callable[[float | None], None]] = []
        self.reconnect_attempts = reconnect_attempts
        self.command_timeout = command_timeout
        self._conn: paramiko.Transport | None = None
        self._jump: SshTransport | None = None
        self._shells = ShellPool(max_shells, self._new_shell, lambda: self._conn)
        self._files = RemoteFiles(self)
        self._home: str | None = None
        self._lock = threading.RLock()  # connection state
        self.connects = 0  # how many times we (re)connected: tests and benchmarks read it

    @classmethod
    def from_config(
        cls, host: str, *, ssh_config: str | None = None, **kwargs: Any
    ) -> SshTransport:
        overrides = {
            k: kwargs.pop(k)
            for k in ("user", "port", "identity_file", "known_hosts", "proxy_jump")
            if k in kwargs
        }
        return cls(resolve(host, ssh_config=ssh_config, **overrides), **kwargs)

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> paramiko.Transport:
        """Return a live connection, (re)connecting with backoff when it dropped."""
        with self._lock:
            if self._conn is not None and self._conn.is_active():
                return self._conn
            self._drop()
            delay, last = 0.5, None
            for attempt in range(max(1, self.reconnect_attempts)):
                if attempt and deadline.expired():
                    break  # the caller's time is up: no further attempt
                try:
                    self._conn = self._open()
                    self.connects += 1
                    self._watch(self._conn)
                    return self._conn
                except (HostKeyError, AuthenticationError):
                    raise
                except (OSError, EOFError, ClusterConnectionError) as exc:
                    last = exc
                    log.info(
                        "connect to %s failed (attempt %d): %s", self.target.label, attempt + 1, exc
                    )
                    if attempt + 1 < self.reconnect_attempts:
                        time.sleep(delay)
                        delay *= 2
            raise ClusterConnectionError(
                f"Could not connect to {self.target.label} ({self.target.alias}): {last}. "
                "Check that the host is reachable (VPN?), and the HostName/Port in your ssh config."
            ) from last

    def _open(self) -> paramiko.Transport:
        import paramiko

        t = self.target
        if t.proxy_jump:
            sock = self._open_jump().hop_channel(t.hostname, t.port)
        elif t.proxy_command:
            sock = _proxy_command(t.proxy_command)
        else:
            try:
                sock = socket.create_connection(
                    (t.hostname, t.port), timeout=deadline.left(t.connect_timeout) or 0.1
                )
            except OSError as exc:
                raise ClusterConnectionError(
                    f"TCP connect to {t.hostname}:{t.port} failed: {exc}"
                ) from exc
            sock.settimeout(None)
            # small messages at once (a channel open right after a close, a keystroke): with
            # Nagle on, each waited for the last one's ACK; OpenSSH sets it too
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = paramiko.Transport(
            sock, default_window_size=WINDOW_SIZE, default_max_packet_size=MAX_PACKET
        )
        _fast_ciphers_first(conn)
        try:
            hosts = self._known_keys()
            known = hosts.keys
            if known:  # ask only for key types we can verify, as OpenSSH does
                opts = conn.get_security_options()
                preferred = [
                    k
                    for k in opts.key_types
                    if k in known or k.replace("-cert-v01@openssh.com", "") in known
                ]
                if preferred:
                    opts.key_types = preferred
            via = f" through ProxyCommand {t.proxy_command!r}" if t.proxy_command else ""
            wait = deadline.left(t.connect_timeout) or 0.1
            try:
                conn.start_client(timeout=wait)
            except paramiko.SSHException as exc:  # no banner, a proxy that died, ...
                raise ClusterConnectionError(
                    f"No SSH server answered at {t.hostname}:{t.port}{via} ({exc}). Check the "
                    "host and port (and that the proxy command works: run it in a shell)."
                ) from exc
            if conn.host_key is None:  # start_client gave up waiting without a word
                raise ClusterConnectionError(
                    f"{t.hostname}:{t.port}{via} took the connection but no SSH server greeted "
                    f"us within {wait:.0f} s: a firewall, a VPN that is down, or a port that is "
                    "not SSH. Check the host and port, and your VPN."
                )
            verify_host_key(
                conn, t, hosts, trust_name=self.trust_name, on_unknown_host=self.on_unknown_host
            )
            authenticate(conn, t, self._prompt_now)
        except BaseException:
            conn.close()
            raise
        return conn

    # -- is the link alive? -----------------------------------------------------------------

    def _watch(self, conn: paramiko.Transport) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        self._silence(None)
        if self.alive_interval > 0:
            self._watchdog = Watchdog(
                conn,
                interval=self.alive_interval,
                count_max=max(1, self.alive_count_max),
                on_silence=self._silence,
                on_dead=lambda: self._declare_dead(conn),
            )

    def _silence(self, seconds: float | None) -> None:
        if seconds == self._silent_for:
            return
        self._silent_for = seconds
        for listener in list(self._stall_listeners):
            try:
                listener(seconds)
            except Exception:  # a face's callback must not stop the watchdog
                log.exception("stall listener failed")

    def _declare_dead(self, conn: paramiko.Transport) -> None:
        """No keepalive answered: close the link first (never blocks on a silent peer),
        which ends every call waiting on it; the next call reconnects."""
        conn.close()
        self._drop_if(conn)

    def stalled_s(self) -> float:
        return self._silent_for or 0.0

    def watch_stall(self, listener: Callable[[float | None], None]) -> None:
        self._stall_listeners.append(listener)

    def _stall_note(self) -> str:
        if not self._silent_for:
            return ""
        return (
            f" The connection has not answered for {self._silent_for:.0f} s (stalled: network, "
            "VPN or sleep?); hpcui closes it and reconnects on the next call."
        )

    def _open_jump(self) -> SshTransport:
        hops = parse_jump(self.target.proxy_jump or "")
        user, host, port = hops[-1]
        earlier = ",".join(
            f"{u + '@' if u else ''}{h}{':' + str(p) if p else ''}" for u, h, p in hops[:-1]
        )
        jump_target = resolve(
            host,
            ssh_config=self.target.ssh_config,
            user=user,
            port=port,
            proxy_jump=earlier or None,
        )
        if self._jump is None or self._jump.target != jump_target:
            self._jump = SshTransport(
                jump_target,
                prompt=self.prompt,
                on_unknown_host=self.on_unknown_host,
                login_shell=False,
            )
        return self._jump

    def hop_channel(self, host: str, port: int) -> paramiko.Channel:
        """A direct-tcpip channel to host:port, used as the socket of a ProxyJump hop."""
        conn = self.connect()
        try:
            return conn.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0))
        except Exception as exc:
            raise ClusterConnectionError(
                f"Jump host {self.target.label} could not open a tunnel to {host}:{port}: {exc}. "
                "Check AllowTcpForwarding on the jump host and the target's HostName/Port."
            ) from exc

    def open_tunnel(self, host: str, port: int) -> paramiko.Channel:
        """A direct-tcpip channel to host:port from this login node: a forward to a job's
        node carries one local connection over it."""
        import paramiko

        conn = self.connect()
        try:
            return conn.open_channel(
                "direct-tcpip", (host, port), ("127.0.0.1", 0),
                window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET,
            )  # fmt: skip
        except paramiko.ChannelException as exc:  # the server tried and could not
            raise UsageError(
                f"{self.target.label} could not reach {host}:{port} ({exc.text}): nothing "
                "listens there yet, or the site does not allow forwarding "
                "(AllowTcpForwarding)."
            ) from exc
        except Exception as exc:
            raise ClusterConnectionError(
                f"{self.target.label} could not open a tunnel to {host}:{port}: {exc}. "
                "Check AllowTcpForwarding there and the target's HostName/Port."
            ) from exc

    def _known_keys(self) -> KnownHosts:
        return read_known_hosts(
            (*self.target.known_hosts, *self.target.global_known_hosts),
            self.target.known_hosts_name,
        )

    def _prompt_now(self) -> PromptCallback | None:
        """Who can answer a question now. A callback with `for_caller()` (the agent's)
        answers for the thread that is connecting: paramiko asks from its own thread."""
        bind = getattr(self.prompt, "for_caller", None)
        return bind() if bind is not None else self.prompt

    def _drop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        self._shells.close_idle()
        self._files.reset()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def _drop_if(self, conn: paramiko.Transport | None) -> None:
        """Drop the connection if it is still `conn` (a newer one is kept)."""
        with self._lock:
            if self._conn is conn:
                self._drop()

    def close(self) -> None:
        with self._lock:
            self._drop()
            if self._jump is not None:
                self._jump.close()
                self._jump = None

    # -- commands ---------------------------------------------------------------------------

    def run(
        self, cmd: Command, *, timeout: float | None = None, stdin: bytes | None = None
    ) -> CommandResult:
        raw = to_command(cmd)
        text = raw.decode("utf-8", "replace")
        if stdin is not None:
            return self._run_exec(raw, stdin, timeout)
        timeout = deadline.left(self.command_timeout if timeout is None else timeout)
        shell = self._shells.acquire()
        try:
            rc, out, err = shell.run(raw, timeout)
        except TimeoutError:
            self._shells.release(shell, reuse=False)
            raise CommandTimeout(
                f"`{text[:200]}` did not finish within {timeout or 0:.0f} s on "
                f"{self.target.label}.{self._stall_note() or ' The login node may be overloaded; retry or raise the timeout.'}"
            ) from None
        except Exception as exc:  # EOF, socket errors, paramiko errors: the link is gone
            self._shells.release(shell, reuse=False)
            self._drop_if(shell.conn)
            raise ConnectionLost(
                f"Connection to {self.target.label} dropped while running `{text[:200]}`; it "
                "may or may not have run. The next call reconnects."
            ) from exc
        except BaseException:  # Ctrl-C mid-command: the shell's protocol is mid-way, close it
            self._shells.release(shell, reuse=False)  # (kept, its pool slot would leak)
            raise
        self._shells.release(shell, reuse=True)
        return CommandResult(rc, out, err, text)

    def _new_shell(self) -> Shell:
        conn = self.connect()
        start = LOGIN_SHELL if self.login_shell else PLAIN_SHELL
        try:
            return Shell(conn, start, timeout=deadline.left(60.0))
        except (EOFError, TimeoutError) as exc:
            if not self.login_shell:
                raise ClusterConnectionError(
                    f"Could not start a shell on {self.target.label}: {exc}"
                ) from exc
            log.warning("login shell on %s failed (%s); using plain sh", self.target.label, exc)
            return Shell(conn, PLAIN_SHELL, timeout=60.0)

    def _run_exec(self, raw: bytes, stdin: bytes, timeout: float | None) -> CommandResult:
        """A separate exec channel, for commands that read stdin (e.g. a tar stream)."""
        conn = self.connect()
        chan = conn.open_session(window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET)
        chan.settimeout(deadline.left(timeout or self.command_timeout))
        try:
            chan.exec_command(raw.decode("utf-8", "surrogateescape"))
            out, err = bytearray(), bytearray()
            view = memoryview(stdin)
            while view:
                n = chan.send(view[: 1 << 18])
                view = view[n:]
                while chan.recv_ready():
                    out += chan.recv(1 << 20)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 20)
            chan.shutdown_write()
            while True:
                if chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 20)
                    continue
                data = chan.recv(1 << 20)
                if not data:
                    break
                out += data
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(1 << 20)
            rc = chan.recv_exit_status()
        except TimeoutError:
            raise CommandTimeout(
                f"Command on {self.target.label} timed out.{self._stall_note()}"
            ) from None
        finally:
            chan.close()
        return CommandResult(rc, bytes(out), bytes(err), raw.decode("utf-8", "replace"))

    def open_stream(self, cmd: Command) -> ChannelStream:
        """`cmd` on its own exec channel of this connection, its output pushed as it comes
        (8 followed ranks: 8 channels, one connection)."""
        raw = to_command(cmd)
        conn = self.connect()
        try:
            chan = conn.open_session(window_size=WINDOW_SIZE, max_packet_size=MAX_PACKET)
            chan.exec_command(raw.decode("utf-8", "surrogateescape"))
        except Exception as exc:
            raise ConnectionLost(
                f"Connection to {self.target.label} dropped while starting a log reader."
            ) from exc
        return ChannelStream(chan)

    def open_terminal(self, script: str, *, term: str, cols: int, rows: int) -> paramiko.Channel:
        """A pty channel running `script` in the login shell (srun is on PATH there at
        sites that set it up in /etc/profile)."""
        conn = self.connect()
        login = 'if command -v bash >/dev/null 2>&1; then exec bash --login -c "$0"; else exec sh -l -c "$0"; fi'
        try:
            chan = conn.open_session()
            chan.get_pty(term=term, width=cols, height=rows)
            chan.exec_command(quote_argv(["/bin/sh", "-c", login, script]).decode())
        except Exception as exc:
            raise ConnectionLost(
                f"Connection to {self.target.label} dropped while opening a terminal."
            ) from exc
        return chan

    def home(self) -> str:
        if self._home is None:
            self._home = super().home()
        return self._home

    # -- files (hpcui.transport.ssh.sftp) -----------------------------------------------------

    def sftp(self) -> paramiko.SFTPClient:
        return self._files.client()

    def _link_up(self) -> bool:
        return self._conn is not None and self._conn.is_active()

    def write_file(
        self,
        path: str,
        data: bytes | Iterable[bytes],
        *,
        mode: int | None = 0o600,
        offset: int | None = None,
    ) -> int:
        return self._files.write_file(path, data, mode=mode, offset=offset)

    def read_file(self, path: str, *, offset: int = 0, length: int | None = None) -> bytes:
        return self._files.read_file(path, offset=offset, length=length)

    def stat_size(self, path: str) -> int | None:
        return self._files.stat_size(path)

    def stat_file(self, path: str) -> RemoteStat | None:
        return self._files.stat_file(path)

    def _put_files(
        self, directory: str, files: dict[str, bytes], then: Command | None, first: Command | None
    ) -> CommandResult:
        return self._files.put_files(directory, files, then, first)


def _proxy_command(command: str) -> paramiko.ProxyCommand:
    """The ssh config's ProxyCommand as the connection's socket, run as OpenSSH runs it
    (``$SHELL -c "exec COMMAND"``; /bin/sh here). It comes from the user's own ssh config,
    so it runs with exactly the rights ``ssh`` would give it."""
    import paramiko

    try:
        return paramiko.ProxyCommand(shlex.join(["/bin/sh", "-c", f"exec {command}"]))
    except Exception as exc:  # paramiko wraps OSError in ProxyCommandFailure
        raise ClusterConnectionError(
            f"ProxyCommand {command!r} could not be started: {exc}. Check it in your ssh config."
        ) from exc


#: AES-GCM first: one AEAD pass per packet instead of AES-CTR plus a separate HMAC (what
#: paramiko offers first); a forward or `hpcui proxy` carried 1.3x the bytes per second
#: with it (benchmarks/node_ssh_bench.py). Servers without it get the next offered.
FAST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _fast_ciphers_first(conn: paramiko.Transport) -> None:
    opts = conn.get_security_options()
    offered = tuple(opts.ciphers)
    opts.ciphers = tuple(c for c in FAST_CIPHERS if c in offered) + tuple(
        c for c in offered if c not in FAST_CIPHERS
    )
