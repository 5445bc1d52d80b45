"""Transport benchmark against the dev cluster: command round trip and SFTP throughput.

    HPCUI_CONFIG=.devcluster/hpcui.toml python -m benchmarks.transport_bench

Side by side in one run: hpcui's persistent framed shell vs a fresh paramiko
exec_command per command vs a new `ssh` process per command; SFTP 64 MiB up/down vs scp.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import paramiko

from benchmarks import sized
from hpcui.transport.ssh.session import SshTransport

ROOT = Path(__file__).resolve().parent.parent
SSH_CONFIG = str(ROOT / ".devcluster" / "ssh" / "config")
HOST = "hpcui-dev"
ROUNDS = sized(5, 1)


def median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    t = SshTransport.from_config(HOST, ssh_config=SSH_CONFIG)
    t.run("true")
    conn = t.connect()

    def paramiko_exec() -> None:
        chan = conn.open_session()
        chan.exec_command("true")
        chan.recv_exit_status()
        chan.close()

    def ssh_process() -> None:
        subprocess.run(["ssh", "-F", SSH_CONFIG, HOST, "true"], check=True)

    print("command round trip, median of `true`:")
    print(f"  hpcui persistent channel   {median_ms(lambda: t.run('true'), sized(500, 5)):8.2f} ms")
    print(f"  paramiko exec per command  {median_ms(paramiko_exec, sized(50, 3)):8.2f} ms")
    print(f"  new ssh process per command{median_ms(ssh_process, sized(20, 2)):8.2f} ms")

    size = sized(64, 1) * 1024 * 1024
    data = os.urandom(size)
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "blob"
        local.write_bytes(data)
        remote = "/tmp/hpcui-bench-blob"

        def timed(fn) -> float:
            start = time.perf_counter()
            fn()
            return size / (1024 * 1024) / (time.perf_counter() - start)

        scp_base = ["scp", "-q", "-F", SSH_CONFIG]
        got: dict[str, list[float]] = {"up": [], "down": [], "scp_up": [], "scp_down": []}
        for _ in range(ROUNDS):  # alternate, so both see the same load; report medians
            got["up"].append(timed(lambda: t.write_file(remote, data)))
            got["scp_up"].append(
                timed(
                    lambda: subprocess.run([*scp_base, str(local), f"{HOST}:{remote}2"], check=True)
                )
            )
            back: dict[str, bytes] = {}
            got["down"].append(timed(lambda b=back: b.setdefault("d", t.read_file(remote))))
            assert back["d"] == data
            got["scp_down"].append(
                timed(
                    lambda: subprocess.run(
                        [*scp_base, f"{HOST}:{remote}2", str(Path(tmp) / "b")], check=True
                    )
                )
            )
        up, scp_up, down, scp_down = (
            statistics.median(got[k]) for k in ("up", "scp_up", "down", "scp_down")
        )
        t.run(["rm", "-f", remote, remote + "2"])
    print(
        f"file transfer {size >> 20} MiB (MiB/s, median of {ROUNDS} alternating rounds; hpcui streams files >= 8 MiB through a channel, smaller ones by SFTP):"
    )
    print(f"  upload    hpcui {up:7.1f}   scp {scp_up:7.1f}   ratio {up / scp_up:5.2f}")
    print(f"  download  hpcui {down:7.1f}   scp {scp_down:7.1f}   ratio {down / scp_down:5.2f}")
    print(f"  cipher: {conn.remote_cipher}, paramiko {paramiko.__version__}")
    t.close()


if __name__ == "__main__":
    main()
