"""`python -m hpcui.cli`: the same as the `hpcui` script (agent first, see hpcui.agent).

The entry point sits above the faces (it decides between the agent and this process), so it
is run here as a program by name, not imported from below."""

import runpy

runpy.run_module("hpcui.agent.client", run_name="__main__", alter_sys=True)
