"""The hpcui agent: one authenticated connection per cluster, shared by every hpcui
process of one user (CLI calls, API scripts) over a unix socket — hpcui's ControlMaster.

`client` is what the `hpcui` script runs first; it and `paths`/`wire` use only the
standard library, so a warm call never imports paramiko or pydantic. `server` is the
agent process itself. See docs/architecture.md ("The agent").
"""
