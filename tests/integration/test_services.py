"""Issue 33 on the dev cluster: a job's port forwarded over the real SSH connection, and
`hpcui jupyter` running the real JupyterLab (installed in the cluster's environment by
scripts/devcluster) on a compute node, reached here through the agent's forward."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from hpcui.backends.states import JobState
from hpcui.errors import UsageError
from tests.conftest import DEVCLUSTER, ROOT
from tests.integration.ranks import VENV_PYTHON
from tests.integration.test_agent import hpcui
from tests.integration.test_any_job import sbatch_script, wait_state
from tests.integration.test_submit_slurm import _kill_session_sshd

pytestmark = pytest.mark.devcluster

#: a service in a job as a user starts one: bound to the node's own address
HTTP = """#!/bin/bash
#SBATCH --time=3
cd ~/anyjob && exec python3 -m http.server {port} --bind "$(getent hosts $SLURMD_NODENAME | cut -d' ' -f1)"
"""


def get(url: str, timeout: float = 10, ok: int = 200) -> str:
    """The page (`ok`: the status expected; an error status gives its body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            status, body = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode()
    assert status == ok, (status, body[:300])
    return body


class Browser:
    """A browser's cookie jar: the token URL once (the gate sets a cookie and redirects
    without the token), then plain addresses."""

    def __init__(self, url: str) -> None:
        import http.cookiejar

        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        with self.opener.open(url, timeout=10) as resp:
            assert "token=" not in resp.url, resp.url  # redirected to the address without it
            self.first = resp.read().decode()
        self.base = url.split("?", 1)[0]

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as resp:
            return resp.read().decode()


def peer_status(host: str, port: int, path: str = "data/runs") -> int:
    """The HTTP status the cluster's second user, hpcpeer, gets from host:port directly."""
    probe = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n"
        f"    print(urllib.request.urlopen('http://{host}:{port}/{path}', timeout=10).status)\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code)\n"
    )
    res = subprocess.run(
        ["runuser", "-u", "hpcpeer", "--", "python3", "-c", probe],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return int(res.stdout.strip())


def listing_through(fwd) -> str:
    """The job's http.server page through the forward (it binds a moment after the job
    starts: asked again for up to 20 s)."""
    for _ in range(40):
        try:
            return get(f"http://{fwd.address}/")
        except OSError:
            fwd.wait(0.5)
    raise AssertionError(f"nothing answered through {fwd.describe()}: {fwd.errors}")


def test_a_jobs_port_is_reached_here_until_the_job_ends(site, monkeypatch):
    from hpcui.jobs import forwarding

    monkeypatch.setattr(forwarding, "JOB_CHECK_S", 1.0)
    port = 20000 + int(uuid.uuid4().int % 5000)
    job_id = sbatch_script(site, HTTP.format(port=port))
    wait_state(site, job_id, {JobState.RUNNING})
    fwd = site.control.forward(job_id, port)
    try:
        assert fwd.address.startswith("127.0.0.1:") and fwd.node.startswith(("node", "dev24n"))
        assert "Directory listing" in listing_through(fwd)
        connects = site.transport.connects
        _kill_session_sshd(site)  # the link drops: a new connection logs in again
        assert "Directory listing" in listing_through(fwd)
        assert site.transport.connects == connects + 1 and not fwd.closed
        site.control.cancel([job_id])
        assert fwd.wait(30), "the forward outlived its job"
    finally:
        fwd.close()
    with pytest.raises(UsageError, match="needs a running job"):
        site.control.forward(job_id, port)


@pytest.fixture
def lab_env(agent_env):
    """This test's own agent, and a second table for the dev login whose Python has
    JupyterLab (a user's setup: one login, two environments)."""
    env = agent_env("5m")
    config = Path(env["HPCUI_CONFIG"])
    base = config.read_text()
    dev = base.split("[clusters.dev]\n", 1)[1].split("\n\n", 1)[0]
    lab = dev.replace('python = "/usr/bin/python3"', f'python = "{VENV_PYTHON}"')
    config.write_text(f"{base}\n[clusters.lab]\n{lab}\n")
    return env


async def run_cell(base: str, token: str, code: str) -> str:
    """`code` in a new kernel of the server, over its REST API and kernel websocket (the
    protocol JupyterLab's notebooks speak): what the cell printed."""
    import aiohttp  # textual-serve's dependency: the websocket client

    auth = {"Authorization": f"token {token}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.post(f"{base}api/kernels", json={"name": "python3"}) as resp:
            assert resp.status == 201, await resp.text()
            kernel = (await resp.json())["id"]
        msg_id = uuid.uuid4().hex
        request = {
            "header": {"msg_id": msg_id, "username": "", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }  # fmt: skip
        printed = []
        ws_url = base.replace("http://", "ws://") + f"api/kernels/{kernel}/channels"
        async with http.ws_connect(ws_url) as ws:
            await ws.send_str(json.dumps(request))
            async for frame in ws:
                msg = json.loads(frame.data)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "stream":
                    printed.append(msg["content"]["text"])
                elif kind == "error":
                    raise AssertionError("\n".join(msg["content"]["traceback"]))
                elif kind == "status" and msg["content"].get("execution_state") == "idle":
                    # iopub's idle comes after every output of the request; the shell
                    # channel's execute_reply may overtake a stream message (a CI run got '')
                    break
        await http.delete(f"{base}api/kernels/{kernel}")
    return "".join(printed)


def test_jupyter_on_a_compute_node_through_the_agents_forward(lab_env, tmp_path):
    """`hpcui jupyter` returns once the agent holds the forward; the printed URL opens
    JupyterLab here, a cell runs on the job's node; `--stop` ends job and forward."""
    env = lab_env
    missing = hpcui(env, "-c", "dev", "jupyter", "--no-browser")  # /usr/bin/python3 has none
    assert missing.returncode == 2
    assert "JupyterLab is not installed in dev's Python (/usr/bin/python3)" in missing.stderr
    assert "pip install jupyterlab" in missing.stderr
    started = hpcui(
        env, "-c", "lab", "jupyter", "--no-browser", "--json", "--time", "5", "--timeout", "150",
        timeout=200,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    [row] = json.loads(started.stdout)
    url = row["url"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/lab\?token=[0-9a-f]+", url), url
    assert "token=" not in started.stderr  # the token is printed where asked, not logged
    page = get(url)
    assert "JupyterLab" in page
    base, token = url.split("lab?token=")
    said = asyncio.run(
        asyncio.wait_for(
            run_cell(
                base,
                token,
                "import os; print(os.environ['SLURMD_NODENAME'], os.environ['SLURM_JOB_ID'])",
            ),
            120,
        )
    )
    node, job_id = said.split()
    assert (node, job_id) == (row["node"], row["job_id"])  # the kernel runs inside the job
    listed = hpcui(env, "forward", "--list", "--json")
    assert [f["job_id"] for f in json.loads(listed.stdout)] == [job_id]
    shot = screenshot(url, tmp_path / "jupyter.png")
    assert shot.startswith(b"\x89PNG") and len(shot) > 10_000
    stopped = hpcui(env, "-c", "lab", "jupyter", "--stop")
    assert stopped.returncode == 0 and f"cancelled jupyter job {job_id}" in stopped.stdout
    assert json.loads(hpcui(env, "forward", "--list", "--json").stdout) == []
    with pytest.raises(OSError):
        get(url, timeout=5)  # the port is closed with the forward


def screenshot(url: str, out: Path) -> bytes:
    """Headless Chromium's picture of the page once JupyterLab drew it (kept beside the
    other screenshots when HPCUI_SCREENSHOTS is set)."""
    from tests.chromium import CHROMIUM

    assert CHROMIUM, "chromium is not installed: run scripts/install-deps"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={out.parent / 'chromium'}", "--window-size=1280,800",
         "--virtual-time-budget=20000", f"--screenshot={out}", url],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    data = out.read_bytes()
    if os.environ.get("HPCUI_SCREENSHOTS"):
        shutil.copy(out, ROOT / "screenshots" / "jupyter-lab.png")
    return data


def test_an_api_forward_rides_the_agents_login(lab_env, monkeypatch):
    """`cluster.forward` in a script with the agent on: each connection is a tunnel the
    agent opens on its own login and relays (no second login, no second 2FA code)."""
    from hpcui.clusters import api
    from hpcui.transport.agent.remote import AgentTransport

    for key in ("XDG_RUNTIME_DIR", "HPCUI_CONFIG", "HPCUI_DATA_DIR"):
        monkeypatch.setenv(key, lab_env[key])
    monkeypatch.delenv("HPCUI_AGENT", raising=False)
    monkeypatch.setattr(api, "_clusters", {})
    cluster = api.connect("dev")
    try:
        assert isinstance(cluster.transport, AgentTransport)
        port = 25000 + int(uuid.uuid4().int % 5000)
        job_id = sbatch_script(cluster, HTTP.format(port=port))
        wait_state(cluster, job_id, {JobState.RUNNING})
        with cluster.control.forward(job_id, port) as fwd:
            assert "Directory listing" in listing_through(fwd)
        cluster.control.cancel([job_id])
    finally:
        cluster.close()


EVENTS = """#!/bin/bash
#SBATCH --time=2
{python} -c "from torch.utils.tensorboard import SummaryWriter
w = SummaryWriter('runs/first')
for step in range(5):
    w.add_scalar('loss', 1 / (step + 1), step)
w.close()"
"""


def test_tensorboard_over_a_jobs_folder(lab_env, dev):
    """A plain job wrote TensorBoard events in its working directory; `hpcui tensorboard
    JOB` serves that folder from a small job, forwarded: the page is TensorBoard's and
    its API lists the run with the job's scalar."""
    env = lab_env
    folder = f"{dev.transport.home()}/tb-{uuid.uuid4().hex[:8]}"
    dev.run(["mkdir", "-p", folder])
    wrote = sbatch_script(dev, EVENTS.format(python=VENV_PYTHON), f"--chdir={folder}")
    wait_state(dev, wrote, {JobState.COMPLETED})
    started = hpcui(
        env, "-c", "lab", "tensorboard", f"dev:{wrote}", "--no-browser", "--json", "--time",
        "5", "--timeout", "150", timeout=200,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    [row] = json.loads(started.stdout)
    url = row["url"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", url), url
    assert get(url.split("?")[0] + "data/runs", ok=403)  # the forward alone is not enough
    browser = Browser(url)
    assert "<tf-tensorboard" in browser.first or "TensorBoard" in browser.first
    runs = json.loads(browser.get("data/runs"))
    assert runs == ["runs/first"]  # relative to the job's folder
    tags = json.loads(browser.get("data/plugin/scalars/tags"))
    assert "loss" in tags["runs/first"]
    points = json.loads(browser.get("data/plugin/scalars/scalars?run=runs/first&tag=loss"))
    assert [(step, round(value, 4)) for _, step, value in points] == [
        (step, round(1 / (step + 1), 4)) for step in range(5)
    ]  # what the job's SummaryWriter wrote, through the forward
    # the cluster's second user, straight to the node's port: refused, nothing served
    assert peer_status(row["node"], row["remote_port"]) == 403
    assert peer_status(row["node"], row["remote_port"], "?token=wrong") == 403
    stopped = hpcui(env, "-c", "lab", "tensorboard", "--stop")
    assert f"cancelled tensorboard job {row['job_id']}" in stopped.stdout


def test_the_job_screen_opens_a_jupyter_jobs_lab(devcluster, tmp_path, monkeypatch):
    """The app (its own connection, Pilot): B on a JupyterLab job that hpcui started finds
    its server, forwards, opens the URL with its token and copies it."""
    import hpcui.clusters.api
    from hpcui.services import web as services
    from hpcui.tui.app import HpcuiApp
    from hpcui.tui.screens.job import JobScreen
    from tests.support.pilot import wait_for

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'default = "lab"\n[clusters.lab]\nhost = "hpcui-dev"\nssh_config = "{DEVCLUSTER}/ssh/config"\n'
        f'profile = "dev"\npython = "{VENV_PYTHON}"\nremote_base = "~/.hpcui"\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    monkeypatch.setenv("HPCUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    kind = services.KINDS["jupyter"]
    opened: list[str] = []

    async def go() -> str:
        app = HpcuiApp()
        app.open_url = lambda url, **_: opened.append(url)  # type: ignore[method-assign]
        async with app.run_test(size=(140, 40)) as pilot:
            lab = app.hub.conns["lab"]
            await wait_for(pilot, lambda: lab.status in ("connected", "failed"), 60)
            assert lab.status == "connected", (lab.status, getattr(lab, "error", None))
            cluster = app.hub.cluster("lab")
            assert cluster is not None
            job = await asyncio.to_thread(services.submit, cluster, kind, None, time="5m")
            try:
                await asyncio.to_thread(services.wait_for_server, job, kind, timeout=150)
                app.open_job("lab", job.job_id)
                await wait_for(pilot, lambda: isinstance(app.screen, JobScreen))
                await wait_for(pilot, lambda: bool(app.screen.query("#details")))  # composed
                details = app.screen.query_one("#details")
                await wait_for(pilot, lambda: "service     JupyterLab" in str(details.render()))
                await pilot.press("B")
                await wait_for(pilot, lambda: bool(opened), 60)
                assert app.clipboard == opened[0]
                await wait_for(pilot, lambda: "forwarded   127.0.0.1:" in str(details.render()))
                page = await asyncio.to_thread(get, opened[0])
            finally:
                cluster.control.cancel([job.job_id])
        return page

    page = asyncio.run(go())
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/lab\?token=[0-9a-f]+", opened[0])
    assert "JupyterLab" in page


def test_jupyter_in_a_container_image(lab_env):
    """Issue 33 with issue 32: `hpcui jupyter --container IMAGE` checks JupyterLab in the
    image (dev's own Python has none), and the kernel runs inside the image on the node."""
    from tests.integration.test_containers import PYTORCH, SKIPPED

    if SKIPPED.exists():
        pytest.skip(SKIPPED.read_text().strip())
    env = lab_env
    started = hpcui(
        env, "-c", "dev", "jupyter", "--no-browser", "--json", "--time", "5", "--timeout",
        "150", "--container", PYTORCH, timeout=240,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    [row] = json.loads(started.stdout)
    url = row["url"]
    assert "JupyterLab" in get(url)
    base, token = url.split("lab?token=")
    said = asyncio.run(
        asyncio.wait_for(
            run_cell(base, token, "print(open('/etc/hpcui-image').read().strip())"), 120
        )
    )
    assert said.startswith("hpcui dev image pytorch")
    stopped = hpcui(env, "-c", "dev", "jupyter", "--stop")
    assert stopped.returncode == 0 and f"cancelled jupyter job {row['job_id']}" in stopped.stdout


def test_tensorboard_on_the_login_node_where_the_profile_says_so(lab_env, dev):
    """Issue 33's profile rule: with `tensorboard_on = "login"` the server is the user's
    own process on the login node (no job), forwarded the same way; `--stop` ends it."""
    env = lab_env
    config = Path(env["HPCUI_CONFIG"])
    lab = config.read_text().split("[clusters.lab]\n", 1)[1].split("\n\n", 1)[0]
    config.write_text(
        config.read_text()
        + f"\n[clusters.tblogin]\n{lab}\n\n[clusters.tblogin.profile_overrides]\n"
        'tensorboard_on = "login"\n'
    )
    folder = f"{dev.transport.home()}/tb-{uuid.uuid4().hex[:8]}"
    dev.run(["mkdir", "-p", folder])
    wrote = sbatch_script(dev, EVENTS.format(python=VENV_PYTHON), f"--chdir={folder}")
    wait_state(dev, wrote, {JobState.COMPLETED})
    refused = hpcui(env, "-c", "tblogin", "tensorboard", "--logdir", folder, "--gpus", "1")
    assert refused.returncode == 2 and "runs TensorBoard on the login node" in refused.stderr
    started = hpcui(
        env, "-c", "tblogin", "tensorboard", "--logdir", folder, "--no-browser", "--json",
        "--timeout", "120", timeout=180,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    [row] = json.loads(started.stdout)
    assert row["job_id"].startswith("login:") and row["node"] == "127.0.0.1"
    pid = int(row["job_id"].split(":")[1])
    assert "tensorboard" in Path(f"/proc/{pid}/cmdline").read_text()  # the login node's
    points = json.loads(
        Browser(row["url"]).get("data/plugin/scalars/scalars?run=runs/first&tag=loss")
    )
    assert [step for _, step, _ in points] == list(range(5))
    # 127.0.0.1 of the shared login node is every user's: hpcpeer is refused there
    assert peer_status("127.0.0.1", row["remote_port"]) == 403
    stopped = hpcui(env, "-c", "tblogin", "tensorboard", "--stop")
    assert f"stopped tensorboard (pid {pid})" in stopped.stdout
    assert json.loads(hpcui(env, "forward", "--list", "--json").stdout) == []
    assert (
        not Path(f"/proc/{pid}").exists()
        or "tensorboard" not in Path(f"/proc/{pid}/cmdline").read_text()
    )


def test_another_local_user_cannot_read_the_browsers_page(tmp_path, monkeypatch):
    """The redirect page a token URL is opened through: hpcpeer (another user of this
    machine) cannot read it, and the browser's argv holds only its path."""
    from hpcui.services.browser import redirect_page

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    page = redirect_page("http://127.0.0.1:8888/lab?token=abc123secret")
    assert "abc123secret" not in page.as_uri()
    os.chmod(tmp_path, 0o755)  # even where the folders above it are open
    peer = subprocess.run(
        ["runuser", "-u", "hpcpeer", "--", "cat", str(page)], capture_output=True, text=True
    )
    assert peer.returncode != 0 and "abc123secret" not in peer.stdout
    assert "Permission denied" in peer.stderr


def test_stop_ends_only_the_servers_hpcui_started(agent_env):
    """`hpcui jupyter --stop` once cancelled any unfinished job named "jupyter": a user's
    own job of that name is left alone (the marker is what the job runs)."""
    env = agent_env("5m")
    mine = hpcui(env, "submit", "time:sleep", "--args", "[120]", "--name", "jupyter",
                 "--time", "5m", "-q")  # fmt: skip
    assert mine.returncode == 0, mine.stderr
    job = mine.stdout.strip()
    try:
        stopped = hpcui(env, "jupyter", "--stop")
        assert stopped.returncode == 0, stopped.stderr
        assert "no jupyter job of hpcui's runs" in stopped.stdout
        shown = json.loads(hpcui(env, "show", job, "--json").stdout)
        assert shown["state"] in ("PENDING", "RUNNING"), shown["state"]
    finally:
        hpcui(env, "cancel", job)


def serve_for(seconds: float) -> int:
    """A job's web server on its node's address for `seconds`; the port it had."""
    import http.server
    import os
    import socket
    import threading
    import time

    host = socket.gethostbyname(os.environ.get("SLURMD_NODENAME") or socket.gethostname())
    server = http.server.ThreadingHTTPServer((host, 0), http.server.SimpleHTTPRequestHandler)
    port = server.server_address[1]
    open(os.path.join(os.environ["HPCUI_JOB_FOLDER"], "port"), "w").write(str(port))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(seconds)
    server.shutdown()
    return port


PEER_LISTENER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(4); s.settimeout(8)
print("listening", flush=True)
try:
    conn, _ = s.accept(); conn.settimeout(3)
    print("GOT " + conn.recv(4096).decode(errors="replace").splitlines()[0], flush=True)
except OSError:
    print("nothing", flush=True)
"""


def test_a_forward_stops_the_moment_its_job_is_known_over(dev_env):
    """Once a job ends its port is anyone's: hpcpeer binds it at once and waits for what
    a browser would send. The forward (the end push tells it) refuses the connection; it
    once carried requests for up to 15 s after the end."""
    import socket
    import time

    from hpcui.clusters.api import connect

    site = connect("dev")
    job = site.submit(serve_for, 6, time="5m", name="served")
    folder = job.folder
    for _ in range(240):
        port_file = site.run(["cat", f"{folder}/port"])
        if port_file.ok and port_file.stdout.strip():
            break
        time.sleep(0.25)
    port = int(port_file.stdout.strip())
    fwd = site.control.forward(job.job_id, port)
    peer = None
    try:
        assert "Directory listing" in listing_through(fwd)
        node_ip = socket.gethostbyname(fwd.node)
        while not site.scheduler.status([job.job_id])[job.job_id].state.is_final:
            time.sleep(0.1)  # the scheduler says it ended (the test asks, not the forward)
        peer = subprocess.Popen(
            ["runuser", "-u", "hpcpeer", "--", "python3", "-c", PEER_LISTENER, node_ip, str(port)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert peer.stdout is not None and peer.stdout.readline().strip() == "listening"
        time.sleep(1.5)  # the end push's news: about a second
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://{fwd.address}/?token=secret", timeout=5).read()
        assert fwd.wait(5), "the forward outlived its job"
        said, _ = peer.communicate(timeout=20)
        assert said.strip() == "nothing", said  # the peer received no request
    finally:
        fwd.close()
        if peer is not None and peer.poll() is None:
            peer.kill()
        site.close()


def test_the_agents_forwards_survive_its_replacement(agent_env, dev):
    """A watched file changed (hpcui's config): the next call replaces the agent. Its
    forward once died while the job ran on; the new agent takes it over on the same local
    port (shared with the old one until then: no moment it is free), and lists it."""
    import time

    env = agent_env("5m")
    port = 20000 + int(uuid.uuid4().int % 5000)
    job_id = sbatch_script(dev, HTTP.format(port=port))
    try:
        wait_state(dev, job_id, {JobState.RUNNING})
        res = hpcui(env, "forward", f"dev:{job_id}", str(port), "--json")
        assert res.returncode == 0, res.stderr
        [row] = json.loads(res.stdout)
        local = row["local"]
        for _ in range(40):
            try:
                assert "Directory listing" in get(f"http://{local}/")
                break
            except OSError:
                time.sleep(0.5)
        before = status_of(env)
        config = Path(env["HPCUI_CONFIG"])
        config.write_text(config.read_text() + "\n# edited\n")  # the agent is now stale
        listed: list = []
        for _ in range(100):  # the first call replaces the agent; the new one takes over
            listed = json.loads(hpcui(env, "forward", "--list", "--json").stdout)
            if listed:
                break
            time.sleep(0.2)
        after = status_of(env)
        assert after["pid"] != before["pid"], "the agent was not replaced"
        assert [r["local"] for r in listed] == [local] and listed[0]["job_id"] == job_id
        assert "Directory listing" in get(f"http://{local}/")  # the same address still works
        for _ in range(100):  # the old agent, its forwards handed over, exits
            if not Path(f"/proc/{before['pid']}").exists():
                break
            time.sleep(0.1)
        assert not Path(f"/proc/{before['pid']}").exists()
        assert "Directory listing" in get(f"http://{local}/")
    finally:
        dev.control.cancel([job_id])


def status_of(env: dict[str, str]) -> dict:
    res = hpcui(env, "agent", "status", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)
