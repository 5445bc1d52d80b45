"""How bytes reach a login node: one interface, SSH (paramiko) and local (subprocess)."""

from hpcui.transport.base import CommandResult, Transport
from hpcui.transport.quoting import quote_argv, quote_bytes

__all__ = ["CommandResult", "Transport", "quote_argv", "quote_bytes"]
