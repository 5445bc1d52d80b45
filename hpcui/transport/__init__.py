"""How bytes reach a login node: one interface, SSH (paramiko), local (subprocess) and the
agent's socket (`hpcui.transport.agent`).

The names below load on first use: the `hpcui` script's thin client imports
`hpcui.transport.agent.paths` on every call and must not pay for the interface's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcui.transport.base import CommandResult, Transport
    from hpcui.transport.quoting import quote_argv, quote_bytes

__all__ = ["CommandResult", "Transport", "quote_argv", "quote_bytes"]


def __getattr__(name: str) -> Any:
    if name in ("CommandResult", "Transport"):
        from hpcui.transport import base

        return getattr(base, name)
    if name in ("quote_argv", "quote_bytes"):
        from hpcui.transport import quoting

        return getattr(quoting, name)
    raise AttributeError(f"module 'hpcui.transport' has no attribute {name!r}")
