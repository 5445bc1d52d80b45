"""`python -m hpcui.cli`: the same as the `hpcui` script."""

import sys

from hpcui.cli import main

sys.exit(main())
