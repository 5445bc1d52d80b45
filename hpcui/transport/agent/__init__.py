"""The agent's client side, a transport like the others: `remote.AgentTransport` forwards
the Transport interface over the agent's unix socket (`wire` frames), `reach` finds or
starts the agent, `paths` names its socket. Standard library only (`remote` aside): a
warm `hpcui` call imports no paramiko or pydantic. The agent itself (its server side,
which hosts the CLI) is `hpcui.agent`, above the faces."""
