"""hpcui's version: one place (the package, the CLI's --version, the agent's handshake)."""

__version__ = "0.1.0"
