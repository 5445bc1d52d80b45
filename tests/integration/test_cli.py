"""Every `hpcui` command end to end against the dev cluster, human and --json, as a
subprocess with no stdin (what CI sees): output, exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.devcluster

TASKS = textwrap.dedent(
    """
    import time

    def add(a, b, scale=1):
        print(f"adding {a}+{b}", flush=True)
        return {"sum": (a + b) * scale}

    def boom():
        raise ValueError("boom on purpose")

    def ranks():
        import os
        print("rank", os.environ["SLURM_PROCID"], flush=True)
        return int(os.environ["SLURM_PROCID"])

    def slow(n=120):
        for i in range(n):
            print("tick", i, flush=True)
            time.sleep(1)
        return n
    """
)
SCRIPT = textwrap.dedent(
    """
    import sys
    print("script argv", sys.argv[1:], flush=True)
    if "--fail" in sys.argv:
        sys.exit(3)
    """
)


@pytest.fixture(scope="module")
def work(devcluster: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with the user's module and script, and one registry for the
    module: each `hpcui` process finds the jobs the previous one submitted."""
    d = tmp_path_factory.mktemp("cli")
    (d / "clitasks.py").write_text(TASKS)
    (d / "hello.py").write_text(SCRIPT)
    (d / "data").mkdir()
    return d


def hpcui(work: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "HPCUI_CONFIG": str(ROOT / ".devcluster" / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(work / "data"),
        "PYTHONPATH": str(ROOT),
    }
    res = subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,  # non-interactive: nothing may wait for input
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback (most recent call last)" not in res.stderr.split("raised on the cluster")[0]
    return res


def ok_json(res: subprocess.CompletedProcess):  # type: ignore[no-untyped-def]
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_submit_wait_result_show_logs_jobs(work):
    rec = ok_json(
        hpcui(
            work, "submit", "clitasks:add", "--args", "[1, 2]", "--kwargs", '{"scale": 10}',
            "--time", "5m", "--name", "cli-add", "--wait", "--json",
        )
    )  # fmt: skip
    jid = rec["job_id"]
    assert rec["state"] == "COMPLETED" and rec["name"] == "cli-add" and rec["num_tasks"] == 1
    assert rec["result"]["ok"] and rec["result"]["value"] == {"sum": 30}
    assert "partition cpu" in rec["allocation"]

    human = hpcui(work, "result", jid)
    assert human.returncode == 0 and human.stdout.strip() == "{'sum': 30}"
    assert ok_json(hpcui(work, "result", jid, "--json"))["value"] == {"sum": 30}

    show = hpcui(work, "show", jid)
    assert show.returncode == 0 and "COMPLETED" in show.stdout and "efficiency" in show.stdout
    info = ok_json(hpcui(work, "show", jid, "--json"))
    assert info["state"] == "COMPLETED" and info["folder"] == rec["folder"]
    assert info["accounting"]["exit_code"] == 0 and info["accounting"]["job_id"] == jid

    logs = hpcui(work, "logs", jid)
    assert logs.returncode == 0 and "adding 1+2" in logs.stdout
    chunks = [json.loads(line) for line in hpcui(work, "logs", jid, "--json").stdout.splitlines()]
    assert chunks and chunks[0]["task"] == 0 and chunks[0]["stream"] == "stdout"
    assert "adding 1+2" in "".join(c["text"] for c in chunks)
    assert "submitit INFO (" in logs.stdout and "Starting with JobEnvironment" in logs.stdout
    quiet = hpcui(work, "logs", jid, "--quiet-runtime")  # issue 35: the runtime's lines go
    assert quiet.returncode == 0 and quiet.stdout == "adding 1+2\n", quiet.stdout

    hist = ok_json(hpcui(work, "jobs", "--history", "1", "--json"))
    mine = [j for j in hist if j["job_id"] == jid]
    assert mine and mine[0]["state"] == "COMPLETED" and mine[0]["hpcui"] is True, (jid, hist)
    table = hpcui(work, "jobs", "--history", "1", "--state", "completed")
    assert table.returncode == 0 and table.stdout.startswith("JOBID") and jid in table.stdout
    reg = ok_json(hpcui(work, "jobs", "--registry", "--json"))
    assert any(r["job_id"] == jid and r["state"] == "COMPLETED" for r in reg)


def test_failed_job_exit_5_with_remote_traceback(work):
    res = hpcui(work, "submit", "clitasks:boom", "--time", "5m", "--wait")
    assert res.returncode == 5
    assert "raised on the cluster: ValueError: boom on purpose" in res.stderr
    # the remote traceback names the user's file and line and shows the line itself (the
    # node cannot read the client's working copy: the submitted source travelled with it;
    # cloudpickle 3.1.3+ alone would print File "<dynamic-code>" and no line)
    where = f'File "{work / "clitasks.py"}", line 9, in boom\n'
    assert where + '    raise ValueError("boom on purpose")\n' in res.stderr, res.stderr
    jid = res.stdout.split()[2]  # "submitted job <id> on dev (...)"
    out = hpcui(work, "result", jid, "--json")
    assert out.returncode == 5
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["state"] == "FAILED"
    assert data["error"]["type"] == "JobFailedError"
    assert "ValueError: boom on purpose" in data["error"]["remote_traceback"]


def test_multi_task_logs_and_results_per_rank(work):
    jid = hpcui(
        work, "submit", "clitasks:ranks", "--gpus", "2", "--time", "5m", "--wait", "-q"
    ).stdout.split()[0]
    assert ok_json(hpcui(work, "result", jid, "--all-ranks", "--json"))["value"] == [0, 1]
    both = hpcui(work, "logs", jid)
    assert "==> rank 0 <==" in both.stdout and "==> rank 1 <==" in both.stdout
    one = hpcui(work, "logs", jid, "--rank", "1")
    assert "rank 1" in one.stdout and "rank 0" not in one.stdout
    assert hpcui(work, "logs", jid, "--rank", "5").returncode == 2


def test_run_script_follow(work):
    res = hpcui(work, "run", "--time", "5m", "--follow", "hello.py", "--lr", "0.1")
    assert res.returncode == 0, res.stderr
    assert "script argv ['--lr', '0.1']" in res.stdout  # the log, streamed
    assert res.stdout.startswith("submitted job ") and "(hello:" in res.stdout


def test_run_script_wait_shows_its_output_at_the_end(work):
    """`run --wait` printed none of the script's output (only --follow did): it shows it
    once the job ended, as `submit --wait` shows the result (issue 49, defect 11)."""
    res = hpcui(work, "run", "--time", "5m", "--wait", "hello.py", "--lr", "0.2")
    assert res.returncode == 0, res.stderr
    assert "script argv ['--lr', '0.2']" in res.stdout


def test_run_script_exit_status_fails_the_job(work):
    res = hpcui(work, "run", "--time", "5m", "--wait", "--json", "hello.py", "--fail")
    assert res.returncode == 5
    data = json.loads(res.stdout)
    assert (
        data["state"] == "FAILED" and "exited with status 3" in data["result"]["error"]["message"]
    )


def test_timeout_stop_cancel(work):
    jid = hpcui(work, "submit", "clitasks:slow", "--time", "5m", "-q").stdout.strip()
    try:
        waited = hpcui(work, "result", jid, "--timeout", "1")
        assert waited.returncode == 6 and f"hpcui cancel {jid}" in waited.stderr
        queue = ok_json(hpcui(work, "jobs", "--json"))
        assert any(j["job_id"] == jid and j["hpcui"] for j in queue)
        human = hpcui(work, "jobs", "--state", "pending,running")
        assert jid in human.stdout
        stop = ok_json(hpcui(work, "stop", jid, "--json"))
        assert stop["ok"] and "stop_requested" in stop["message"]
        again = hpcui(work, "stop", jid)
        assert again.returncode == 0 and again.stdout.startswith(f"{jid} on dev: stop file")
    finally:
        cancelled = hpcui(work, "cancel", jid, "--json")
    assert ok_json(cancelled) == [
        {"cluster": "dev", "job_id": jid, "ok": True, "message": "cancelled"}
    ]
    res = hpcui(work, "result", jid, "--timeout", "60")
    assert res.returncode == 5 and "cancelled" in res.stderr
    unknown = hpcui(work, "cancel", "999999999")
    assert unknown.returncode == 2 and "does not know job 999999999" in unknown.stderr


def test_scheduler_rejection_is_exit_4(work):
    res = hpcui(work, "submit", "clitasks:add", "--args", "[1, 2]", "--qos", "nosuchqos")
    assert res.returncode == 4 and "rejected the job" in res.stderr
    assert res.stderr.count("\n") == 1


def test_site_state_human_and_json(work):
    quota = hpcui(work, "quota")
    assert quota.returncode == 0 and quota.stdout.startswith("FILESYSTEM") and "df" in quota.stderr
    report = ok_json(hpcui(work, "quota", "--json"))
    assert report["tool"] == "df" and report["entries"][0]["used_bytes"] > 0

    parts = hpcui(work, "partitions")
    assert parts.returncode == 0 and "cpu*" in parts.stdout and "gpu" in parts.stdout
    rows = ok_json(hpcui(work, "partitions", "--json"))
    assert {p["partition"] for p in rows} >= {"cpu", "gpu"}
    assert next(p for p in rows if p["partition"] == "gpu")["gpus_per_node"] == 4

    avail = ok_json(hpcui(work, "modules", "--avail", "--hidden", "--json"))
    assert any(m["full_name"] == "cuda/12.4" and m["default"] for m in avail)
    assert any(m["full_name"] == "cuda/12.2" and m["hidden"] for m in avail)
    assert any(m["full_name"] == "torch" and m["alias_of"] == "pytorch/2.13.0" for m in avail)
    human = hpcui(work, "modules", "--avail")  # hidden ones stay hidden, and it says so
    assert "torch -> pytorch/2.13.0" in human.stdout, human.stdout
    assert "cuda/12.2" not in human.stdout and "1 hidden module(s) not listed" in human.stderr
    named = hpcui(work, "modules", "--avail", "cuda/12.2")  # found when asked for by name
    assert any(ln.split()[:2] == ["cuda/12.2", "H"] for ln in named.stdout.splitlines())
    found = hpcui(work, "modules", "--search", "cuda")
    assert found.returncode == 0 and "cuda/12.4" in found.stdout
    loaded = hpcui(work, "modules", "--json")
    assert loaded.returncode == 0 and json.loads(loaded.stdout) == []
    # what a job's setup loads, on the site whose Python comes as a module
    jobs_get = ok_json(hpcui(work, "-c", "dev24", "modules", "--setup", "--json"))
    assert [m["full_name"] for m in jobs_get] == ["python/3.11"]


def test_clusters_check(work):
    rows = ok_json(hpcui(work, "clusters", "dev", "local", "--check", "--json"))
    dev = rows[0]
    assert dev["name"] == "dev" and dev["default"] is True and dev["check"]["ok"]
    assert dev["check"]["python"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}.")
    human = hpcui(work, "clusters", "--check", "dev")
    assert human.returncode == 0 and "ok" in human.stdout and "hpcui-dev" in human.stdout


def test_no_terminal_means_no_prompt_and_a_clear_error(work):
    """2FA cluster without a terminal: fails at once (exit 3), never waits for input."""
    started = time.monotonic()
    res = hpcui(work, "-c", "dev-2fa", "quota", timeout=60)
    assert res.returncode == 3
    assert "cannot prompt" in res.stderr and res.stderr.count("\n") == 1
    assert time.monotonic() - started < 30
    # `clusters --check` says that cluster needs a code and checks the others; only a
    # failure of one of them fails the command (issue 49, defect 14: it exited 3)
    check = hpcui(work, "clusters", "dev-2fa", "dev", "--check", "--json")
    assert check.returncode == 0, check.stderr
    rows = {r["name"]: r["check"] for r in json.loads(check.stdout)}
    assert rows["dev-2fa"]["ok"] is False and rows["dev-2fa"]["needs_code"] is True
    assert "run `hpcui clusters --check dev-2fa` in a terminal" in rows["dev-2fa"]["error"]
    assert rows["dev"]["ok"] is True
    human = hpcui(work, "clusters", "dev-2fa", "--check")
    assert human.returncode == 0 and "needs a code" in human.stdout


def test_exec_and_script_on_dev(work):
    res = hpcui(work, "exec", "--", "sh", "-c", "whoami; echo err >&2; exit 7")
    assert res.returncode == 7 and res.stdout.strip() == "hpcuser" and res.stderr.strip() == "err"
    # one argument is a shell command line, as `ssh host 'cmd'` (issue 35, defect 2: before,
    # "bash: squeue --me: command not found", exit 127)
    line = hpcui(work, "exec", "whoami; echo 'a b' | tr ' ' _; exit 7")
    assert line.returncode == 7 and line.stdout.split() == ["hpcuser", "a_b"], line.stderr
    squeue = hpcui(work, "exec", "squeue --me")
    assert squeue.returncode == 0 and squeue.stdout.split()[:1] == ["JOBID"], squeue.stderr
    # several arguments stay a program and its arguments, each passed whole
    argv = hpcui(work, "exec", "printf", "%s|", "a b", "$HOME", ";")
    assert argv.returncode == 0 and argv.stdout == "a b|$HOME|;|", argv.stdout
    data = ok_json(hpcui(work, "script", "--gpus", "4", "--json"))
    assert "#SBATCH --gres=gpu:4" in data["script"] and data["allocation"]["partition"] == "gpu"


def test_terminal_answers_the_2fa_prompt(work):
    """With a terminal, keyboard-interactive questions are asked there (pty = a person)."""
    from tests.conftest import DEVCLUSTER
    from tests.support.pty_session import run_on_pty

    seed = (DEVCLUSTER / "ssh" / "totp_seed").read_text().strip()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HPCUI_CONFIG": str(ROOT / ".devcluster" / "hpcui.toml"),
        "HPCUI_DATA_DIR": str(work / "data"),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }
    argv = [sys.executable, "-m", "hpcui.cli", "-c", "dev-2fa", "exec", "whoami"]
    answered = False

    def answer(seen: bytes) -> bytes | None:
        nonlocal answered
        if answered or not seen.rstrip().endswith(b":"):
            return None
        answered = True
        return (
            subprocess.run(
                ["oathtool", "--totp", "-b", seed], capture_output=True, text=True, check=True
            )
            .stdout.strip()
            .encode()
        )

    code, text = run_on_pty(argv, env, answer, timeout=60)
    assert answered, text
    assert code == 0, text
    assert text.rstrip().endswith("hpcuser")


def test_jobs_of_both_sites_in_one_listing(work):
    """`hpcui jobs -c dev,dev24`: Slurm 22.05 and 24.11 asked in parallel, one table, ids as
    CLUSTER:JOBID (what the other commands take); --json rows carry their cluster."""
    ids = {}
    for site in ("dev", "dev24"):
        rec = ok_json(
            hpcui(
                work, "-c", site, "submit", "clitasks:slow", "--args", "[1]", "--time", "5m",
                "--name", f"both-{site}", "--extra=--begin=now+300", "--json",
            )
        )  # fmt: skip
        ids[site] = rec["job_id"]
    try:
        rows = ok_json(hpcui(work, "jobs", "-c", "dev,dev24", "--json"))
        got = {(r["cluster"], r["job_id"]): r for r in rows}
        for site, jid in ids.items():
            assert got[(site, jid)]["name"] == f"both-{site}"
            assert got[(site, jid)]["state"] == "PENDING" and got[(site, jid)]["hpcui"]
        table = hpcui(work, "jobs", "-c", "dev,dev24")
        assert table.returncode == 0, table.stderr
        assert f"dev:{ids['dev']} " in table.stdout and f"dev24:{ids['dev24']} " in table.stdout
        # the printed reference is what `show` takes
        show = ok_json(hpcui(work, "show", f"dev24:{ids['dev24']}", "--json"))
        assert show["cluster"] == "dev24" and show["job_id"] == ids["dev24"]
        bad = hpcui(work, "jobs", "-c", "dev,nosuch")
        assert bad.returncode == 2 and "No cluster named 'nosuch'" in bad.stderr
    finally:
        for site, jid in ids.items():
            hpcui(work, "-c", site, "cancel", jid)


def test_two_tables_for_one_login_list_each_job_once(work):
    """Issue 35, defect 5: `dev` and `dev-jump` log in to the same account (the jump host is
    only the way there), so both list the same `squeue --me`. Each job shows once: under the
    table that submitted it, a job hpcui did not submit under the first table."""
    via_jump = ok_json(
        hpcui(
            work, "-c", "dev-jump", "submit", "clitasks:slow", "--args", "[1]", "--time", "5m",
            "--name", "one-login", "--extra=--begin=now+300", "--json",
        )
    )["job_id"]  # fmt: skip
    plain = hpcui(
        work, "-c", "dev", "exec",
        "sbatch --parsable --begin=now+300 -t 5 -J plain-one-login --wrap 'sleep 1'",
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    plain_id = plain.stdout.strip().split(";")[0]
    try:
        rows = ok_json(hpcui(work, "jobs", "-c", "dev,dev-jump", "--all", "--json"))
        seen = [(r["cluster"], r["job_id"]) for r in rows if r["job_id"] in (via_jump, plain_id)]
        assert sorted(seen) == sorted([("dev-jump", via_jump), ("dev", plain_id)]), rows
        assert len(rows) == len({r["job_id"] for r in rows})  # no job twice
        everything = ok_json(hpcui(work, "jobs", "-c", "dev24,dev-jump,dev", "--all", "--json"))
        ids = [r["job_id"] for r in everything if r["cluster"] != "dev24"]
        assert ids.count(via_jump) == 1 and ids.count(plain_id) == 1, everything
    finally:
        hpcui(work, "-c", "dev-jump", "cancel", via_jump)
        hpcui(work, "-c", "dev", "cancel", plain_id)
