"""The hpcui agent's server side: one authenticated connection per cluster, shared by every
hpcui process of one user (CLI calls, API scripts) over a unix socket — hpcui's
ControlMaster. It hosts the CLI, so it sits above the faces.

`client` is what the `hpcui` script runs first (standard library, with the client side in
`hpcui.transport.agent`), so a warm call never imports paramiko or pydantic. `server` is
the agent process itself. See docs/decisions/agent.md.
"""
