"""Connections to the configured clusters, owned by the app and shared by every screen.

Connecting can ask questions (unknown host key, 2FA code): the core's callbacks are
bridged to modal dialogs (``hpcui.tui.bridge``). A connection that drops is shown in
the header and re-probed from a worker until it answers again; the core's transport
reconnects with backoff on the next call, so the probe is one cheap ``true``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpcui.config import Config
from hpcui.errors import AnswersRejected, ClusterConnectionError, HpcuiError

if TYPE_CHECKING:
    from textual.app import App

    from hpcui.clusters.cluster import Cluster

log = logging.getLogger(__name__)

RECONNECT_S = 10.0

#: status -> (symbol, style) in the header and on the Cluster screen
STATUS_LOOK = {
    "idle": ("○", "dim"),
    "connecting": ("◌", "yellow"),
    "connected": ("●", "green"),
    "stalled": ("◌", "bold yellow"),
    "lost": ("◌", "bold red"),
    "error": ("✗", "bold red"),
}


@dataclass
class Conn:
    """What the app knows about one cluster's connection."""

    name: str
    host: str
    status: str = "idle"  # idle | connecting | connected | stalled | lost | error
    error: str = ""
    cluster: Cluster | None = None
    has_queue: bool = True  # the scheduler's capabilities, read once connected
    has_history: bool = True
    python: str = ""  # the remote Python check, as a sentence
    python_ok: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.cluster is not None and self.status in ("connected", "stalled", "lost")


class Hub:
    """Connects clusters in workers and keeps their state; the app re-renders on changes."""

    def __init__(self, app: App[Any], config: Config, on_change: Callable[[], None]) -> None:
        self.app = app  # for workers, timers and call_from_thread only
        self.config = config
        self.on_change = on_change  # UI thread: the connections' state changed
        names = sorted(config.clusters) or ["local"]
        if "local" not in names:
            names.append("local")
        self.conns: dict[str, Conn] = {
            n: Conn(
                n, (config.clusters[n].host if n in config.clusters else None) or "this machine"
            )
            for n in names
        }

    def add(self, config: Config, name: str) -> None:
        """A cluster just added to the config file (the app's add-cluster dialog)."""
        self.config = config
        self.conns.setdefault(name, Conn(name, config.clusters[name].host or "this machine"))
        self.on_change()

    # -- state -----------------------------------------------------------------------------

    def ready(self) -> list[Conn]:
        return [c for c in self.conns.values() if c.ready]

    def cluster(self, name: str) -> Cluster | None:
        conn = self.conns.get(name)
        return conn.cluster if conn is not None else None

    def _set(self, name: str, status: str, error: str = "") -> None:
        conn = self.conns[name]
        conn.status, conn.error = status, error
        self.on_change()

    # -- connecting ------------------------------------------------------------------------

    def connect(self, name: str) -> None:
        """Connect ``name`` in a worker (modals may ask for a host key or a 2FA code)."""
        conn = self.conns[name]
        if conn.status in ("connecting", "connected", "stalled"):
            return
        conn.status, conn.error = "connecting", ""
        self.on_change()
        self.app.run_worker(
            lambda: self._connect(name),
            thread=True,
            group=f"connect-{name}",
            exclusive=True,
            exit_on_error=False,
        )

    def _connect(self, name: str) -> None:
        import hpcui
        from hpcui.tui.bridge import (
            AppPrompt,
            host_key_bridge,
            prompt_bridge,
        )

        prompt: Any = None
        try:
            cluster = hpcui.connect(
                name,
                prompt=prompt_bridge(self.app, name),
                on_unknown_host=host_key_bridge(self.app, name),
            )
            prompt = cluster.faces.prompt  # the one that will ask (a cached Cluster keeps its own)
            cluster.run(["true"]).check("connecting")
            caps = cluster.capabilities  # PBS: probes its dialect once, here in the worker
        except AnswersRejected as exc:  # a mistyped code: say so, offer to ask again
            cancelled = isinstance(prompt, AppPrompt) and prompt.cancelled
            self.app.call_from_thread(self._rejected, name, str(exc), cancelled)
            return
        except HpcuiError as exc:
            self.app.call_from_thread(self._set, name, "error", str(exc))
            return
        except Exception as exc:  # never let a worker error kill the app
            log.exception("connecting %s", name)
            self.app.call_from_thread(self._set, name, "error", f"{type(exc).__name__}: {exc}")
            return
        conn = self.conns[name]
        conn.has_queue, conn.has_history = caps.queue, caps.history
        conn.cluster = cluster
        cluster.faces.watch_stall(lambda seconds: self._from_watchdog(name, seconds))
        self.app.call_from_thread(self._set, name, "connected")
        self.check_python(name)

    def _rejected(self, name: str, message: str, cancelled: bool) -> None:
        """UI thread: a refused 2FA answer. Cancelled by the person: just say so; a wrong
        code: show why and offer another try (a new code, a new connection)."""
        from hpcui.tui.modals import (
            ConfirmModal,
        )

        if cancelled:
            self._set(name, "error", "login cancelled; press C on the Cluster screen to connect")
            return
        self._set(name, "error", message)

        def again(yes: bool | None) -> None:
            if yes:
                self.connect(name)

        self.app.push_screen(
            ConfirmModal(
                f"{name}: the code was not accepted", f"{message}\n\nTry again?", "Try again"
            ),
            callback=again,
        )

    def check_python(self, name: str) -> None:
        """The remote Python check (cloudpickle needs the same minor version)."""
        conn = self.conns[name]
        cluster = conn.cluster
        if cluster is None:
            return
        try:
            info = cluster.remote_info()
        except HpcuiError as exc:
            conn.python, conn.python_ok = str(exc), False
        else:
            version = ".".join(map(str, info.python_version or ()))
            conn.python = f"Python {version} ({cluster.python}) matches this machine"
            conn.python_ok = True
        self.app.call_from_thread(self.on_change)

    # -- losing and finding it again ---------------------------------------------------------

    def _from_watchdog(self, name: str, seconds: float | None) -> None:
        """The transport's keepalives went unanswered (or answered again): any thread."""
        try:
            self.app.call_from_thread(self._stalled, name, seconds)
        except RuntimeError:  # the app is gone (shutting down)
            pass

    def _stalled(self, name: str, seconds: float | None) -> None:
        conn = self.conns[name]
        if seconds is not None and conn.status in ("connected", "stalled"):
            conn.extra["silent_s"] = seconds
            self._set(name, "stalled", f"no answer for {seconds:.0f} s")
        elif seconds is None and conn.status == "stalled":
            conn.extra.pop("silent_s", None)
            self._set(name, "connected")

    def report(self, name: str, error: BaseException | str | None) -> None:
        """A screen saw a call fail (or succeed: ``None``); UI thread only."""
        conn = self.conns.get(name)
        if conn is None or conn.cluster is None:
            return
        if error is None:
            if conn.status == "lost":
                self._set(name, "connected")
            return
        if isinstance(error, ClusterConnectionError) and conn.status != "lost":
            self._set(name, "lost", str(error))
            self.app.set_timer(RECONNECT_S, lambda: self._probe(name))

    def _probe(self, name: str) -> None:
        conn = self.conns[name]
        if conn.status != "lost" or conn.cluster is None:
            return
        cluster = conn.cluster

        def probe() -> None:
            try:
                cluster.run(["true"]).check("reconnecting")
            except HpcuiError as exc:
                self.app.call_from_thread(conn.extra.__setitem__, "last_probe", str(exc))
                self.app.call_from_thread(
                    self.app.set_timer, RECONNECT_S, lambda: self._probe(name)
                )
                return
            self.app.call_from_thread(self._set, name, "connected")

        # re-armed only after this probe finished: probes never pile up
        self.app.run_worker(
            probe, thread=True, group=f"probe-{name}", exclusive=True, exit_on_error=False
        )

    def header_text(self) -> str:
        """One word per cluster that matters: connected, connecting, lost or failed ones."""
        parts = []
        for conn in self.conns.values():
            if conn.status == "idle":
                continue
            symbol, _style = STATUS_LOOK[conn.status]
            word = {
                "lost": " lost, reconnecting",
                "error": " failed",
                "stalled": f" stalled ({conn.extra.get('silent_s', 0):.0f} s no answer)",
            }.get(conn.status, "")
            parts.append(f"{symbol} {conn.name}{word}")
        return "  ".join(parts) or "no cluster connected"
