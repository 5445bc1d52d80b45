"""A Python that plays native Windows for hpcui's portability tests (a SIMULATION: nothing
here can run Windows or macOS). On PYTHONPATH, it hides what Windows' Python lacks —
fcntl, termios, tty, pty, pwd, grp, resource, and socket.AF_UNIX / SO_PEERCRED — from
the interpreter before anything else imports, so every import of hpcui takes the paths a
Windows laptop takes. msvcrt is absent here as on any Linux, so file locks take hpcui's
last resort (a lock directory). tests/integration/test_portable.py uses it.
"""

import socket
import sys

HIDDEN = {"fcntl", "termios", "tty", "pty", "pwd", "grp", "resource"}


class _NotOnThisPlatform:
    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotOnThisPlatform())
for _name in HIDDEN:
    sys.modules.pop(_name, None)
for _attr in ("AF_UNIX", "SO_PEERCRED"):
    if hasattr(socket, _attr):
        delattr(socket, _attr)


def _socketpair(family=socket.AF_INET, type=socket.SOCK_STREAM, proto=0):  # type: ignore[no-untyped-def]
    """Windows' Python makes socketpair() from a loopback TCP connection (asyncio's self
    pipe uses it); Linux's _socket has only AF_UNIX pairs, gone here: the same emulation."""
    with socket.socket(family, type, proto) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        a = socket.socket(family, type, proto)
        a.connect(listener.getsockname())
        b, _ = listener.accept()
    return a, b


socket.socketpair = _socketpair
