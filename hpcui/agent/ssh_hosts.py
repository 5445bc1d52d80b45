"""The agent keeps `hpcui ssh-config --install`'s file current as jobs start and end, and
a ControlMaster socket (hpcui.agent.mux) for each cluster it is logged in to.

It asks only clusters it is already logged in to (it never logs in by itself: a 2FA site
would ask nobody), one queue listing per cluster every REFRESH_S, and only while the
installed file exists. A job started since is still reached: `hpcui ssh-config --install`
or `hpcui code JOB` adds it at once.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("hpcui.agent")

#: seconds between looks (HPCUI_SSH_HOSTS_REFRESH_S: a test's agent looks every second)
REFRESH_S = float(os.environ.get("HPCUI_SSH_HOSTS_REFRESH_S") or 20.0)


def keep(stopping: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=_loop, args=(stopping,), name="hpcui-ssh-hosts", daemon=True)
    thread.start()
    return thread


def _loop(stopping: threading.Event) -> None:
    from hpcui.agent import mux
    from hpcui.clusters import api
    from hpcui.services import node_ssh

    while not stopping.wait(REFRESH_S):
        installed = node_ssh.hosts_file().exists()
        for cluster in list(api._clusters.values()):
            if getattr(cluster._transport, "_conn", None) is None:
                continue  # not logged in: not ours to start
            mux.ensure(cluster)  # the entries' fast path, for clusters logged in to
            if not installed:
                continue
            try:
                if node_ssh.refresh(cluster):
                    log.info("ssh hosts of %s rewritten", cluster.name)
            except Exception as exc:  # a dropped link: asked again next time
                log.info("ssh hosts of %s not refreshed: %s", cluster.name, exc)
