"""`python -m hpcui.cli`: the same as the `hpcui` script (agent first, see hpcui.agent)."""

import sys

from hpcui.agent.client import main

sys.exit(main())
