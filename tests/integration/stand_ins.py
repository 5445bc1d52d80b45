"""A stand-in for `sbatch` in the dev cluster user's ~/bin, shared by every test.

It runs the real tool; only test jobs whose names ask for it are slowed (`slowsubmit*`)
or held at a gate (`faultloop*`: while ~/faultgates/NAME.STEP exists the step
waits, after touching NAME.STEP.reached, at most 30 s). Every other job passes straight
through, so tests running in parallel never see a difference. One text per tool: a test
that installs it never changes what another test relies on.
"""

from __future__ import annotations

import uuid

SBATCH = r"""#!/bin/sh
# hpcui test stand-in (tests/integration/stand_ins.py): the real sbatch, slowed or held at
# a gate for test jobs that ask for it
for last; do :; done
name=$(sed -n 's/^#SBATCH --job-name=//p' "$last" 2>/dev/null | head -n 1)
case "$name" in
  slowsubmit*) sleep 2; exec /usr/bin/sbatch "$@" ;;
  faultloop*) ;;
  *) exec /usr/bin/sbatch "$@" ;;
esac
gate() {
  g="$HOME/faultgates/$name.$1"; [ -e "$g" ] || return 0
  : > "$g.reached"; n=0
  while [ -e "$g" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done
}
gate sbatch
out=$(/usr/bin/sbatch "$@"); rc=$?
gate idwrite  # the scheduler has the job; its id is not written yet
[ -n "$out" ] && printf '%s\n' "$out"
exit $rc
"""

TEXTS = {"sbatch": SBATCH}


def install(*names: str):
    """Put the stand-ins `names` in hpcuser's ~/bin (first on PATH) and return a fresh
    connection (a new Cluster: its login shell finds them) to the dev site."""
    from hpcui.clusters.api import connect
    from hpcui.clusters.cluster import Cluster
    from hpcui.config import load_config

    setup = connect("dev")
    setup.run("mkdir -p ~/bin").check()
    for name in names:
        tmp = f"/home/hpcuser/bin/.{name}.{uuid.uuid4().hex[:8]}"
        setup.transport.write_file(tmp, TEXTS[name].encode(), mode=0o755)
        setup.run(f"mv -f {tmp} ~/bin/{name}").check()
    dev = Cluster(load_config().cluster("dev"))  # a new login shell puts ~/bin first in PATH
    for name in names:
        assert dev.run(f"command -v {name}").stdout.strip() == f"/home/hpcuser/bin/{name}"
    return dev
