"""How bytes reach a login node: one interface, SSH (paramiko) and local (subprocess)."""

from hpcui.transport.base import CommandResult, Transport
from hpcui.transport.quoting import quote, quote_argv

__all__ = ["CommandResult", "Transport", "quote", "quote_argv"]
