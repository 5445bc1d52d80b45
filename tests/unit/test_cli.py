"""Headless CLI without a cluster: fast help, usage errors, schemas, completion, scripts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from hpcui.cli import EXIT_TIMEOUT, exit_code_for, main
from hpcui.cli.completion import script as completion_script
from hpcui.cli.parser import JSON_COMMANDS, build_parser


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpcui.cli", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize("argv", [["--help"], ["jobs", "--help"], ["submit", "--help"]])
def test_help_does_not_import_heavy_modules(argv):
    code = (
        f"import sys; from hpcui.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "heavy = ('paramiko', 'textual', 'torch', 'pydantic', 'rich', 'cloudpickle')\n"
        "print('HEAVY', sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout.splitlines()[-1]


def test_clusters_json_lists_local(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[clusters.mn5]\nhost = "glogin1.bsc.es"\nprofile = "dev"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    assert main(["clusters", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {"local", "mn5"}
    assert next(r for r in rows if r["name"] == "local")["default"] is True
    assert all(r["check"] is None for r in rows)  # no --check: no network
    assert main(["clusters", "--names"]) == 0
    assert capsys.readouterr().out.split() == ["local", "mn5"]


def test_user_error_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HPCUI_CONFIG", str(tmp_path / "missing.toml"))
    assert main(["clusters"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcui: Config file") and "Traceback" not in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["frobnicate"], "invalid choice"),
        (["jobs", "--state", "bogus"], "unknown state 'BOGUS'"),
        (["jobs", "--history", "-1"], "must be > 0"),
        (["submit"], "required: MODULE:FUNCTION"),
        (["logs", "1", "--rank", "x"], "invalid int value"),
        (["modules", "--avail", "--search", "x"], "not allowed with argument"),
        (["completion", "tcsh"], "invalid choice"),
    ],
)
def test_bad_arguments_are_usage_errors(argv, needle):
    res = _cli(*argv)
    assert res.returncode == 2
    assert res.stderr.startswith("usage: hpcui")
    assert needle in res.stderr and "Traceback" not in res.stderr


def test_errors_before_the_network_are_usage_errors(tmp_path, monkeypatch, capsys):
    """Bad JSON, unknown functions and bad scripts fail before any connection (exit 2)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'default = "far"\n[clusters.far]\nhost = "unreachable.invalid"\nprofile = "dev"\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymod.py").write_text("def f(x):\n    return x\nvalue = 3\n")
    (tmp_path / "bad.py").write_text("def broken(:\n")
    cases = [
        (["submit", "mymod:f", "--args", "{"], "--args is not valid JSON"),
        (["submit", "mymod:f", "--args", '{"a": 1}'], "must be a JSON list"),
        (["submit", "mymod:f", "--kwargs", "[1]"], "must be a JSON object"),
        (["submit", "mymod:nope"], "has no attribute 'nope'"),
        (["submit", "mymod:value"], "not a function"),
        (["submit", "nosuchmodule:f"], "Cannot import 'nosuchmodule'"),
        (["submit", "mymod"], "Expected MODULE:FUNCTION"),
        (["submit", "missing.py:f"], "No such file"),
        (["run", "nothere.py"], "No such script"),
        (["run", "bad.py"], "does not compile"),
        (["script", "--gpus", "6"], "Ask for 4 or 8 GPUs"),
        (["script", "--time", "soon"], "Invalid resource request"),
    ]
    for argv, needle in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, (argv, err)


def test_script_renders_without_submitting(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[clusters.far]\nhost = "unreachable.invalid"\nprofile = "dev"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    assert main(["script", "-c", "far", "--gpus", "2", "--time", "30m", "--name", "t"]) == 0
    cap = capsys.readouterr()
    assert "#SBATCH --gres=gpu:2" in cap.out and "#SBATCH --job-name=t" in cap.out
    assert "#SBATCH --time=00:30:00" in cap.out and "HOME/.hpcui/jobs/TOKEN" in cap.out
    assert "# 1 node(s) x 2 task(s)" in cap.err
    assert main(["script", "-c", "far", "--array", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["allocation"]["partition"] == "cpu" and "--array=0-4" in data["script"]


def test_profiles_human_and_json(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "mn5-acc" in out and "aspire2a-plus" in out and "pbs" in out
    assert main(["profiles", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    lumi = next(r for r in rows if r["name"] == "lumi-g")
    assert lumi["gpus_per_node"] == 8 and "small-g" in lumi["partitions"]
    assert main(["profiles", "lumi-g", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cpus_per_gpu"] == 7
    assert main(["profiles", "lumi-g"]) == 0
    assert "small-g" in capsys.readouterr().out
    assert main(["profiles", "nope"]) == 2


@pytest.mark.parametrize("command", JSON_COMMANDS)
def test_every_json_command_has_a_schema(command, capsys):
    args = build_parser().parse_args([*_minimal(command), "--json-schema"])
    from hpcui.cli.models import print_schema

    print_schema(args)
    schema = json.loads(capsys.readouterr().out)
    assert schema.get("type") in ("object", "array") or "$ref" in schema or "$defs" in schema


def _minimal(command: str) -> list[str]:
    positional = {
        "submit": ["m:f"],
        "run": ["s.py"],
        "show": ["1"],
        "logs": ["1"],
        "metrics": ["1"],
        "result": ["1"],
        "wait": ["1"],
        "cancel": ["1"],
        "stop": ["1"],
        "usage": ["1"],
        "hold": ["1"],
        "release": ["1"],
        "requeue": ["1"],
        "update": ["1", "--time", "1h"],
        "resubmit": ["1"],
        "files": ["1"],
        "download": ["1", "x"],
        "upload": ["dev", "x", "y"],
        "sync": ["x", "dev:y"],
        "sweep": ["m:f"],
    }
    return [command, *positional.get(command, [])]


def test_json_schema_flag_through_main(capsys):
    assert main(["jobs", "--history", "1", "--json-schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["type"] == "array"
    item = schema["items"]["$ref"].rsplit("/", 1)[-1]
    props = schema["$defs"][item]["properties"]
    assert {"job_id", "state", "exit_code", "efficiency", "hpcui"} <= set(props)


def test_exit_codes_follow_the_error_hierarchy():
    from hpcui import errors
    from hpcui.logs.follow import LogTimeout

    assert exit_code_for(errors.UsageError("x")) == 2
    assert exit_code_for(errors.ConfigError("x")) == 2
    assert exit_code_for(errors.AuthenticationError("x")) == 3
    assert exit_code_for(errors.SchedulerError("x")) == 4
    assert exit_code_for(errors.RemotePythonError("x")) == 4
    assert exit_code_for(errors.JobFailedError("x")) == 5
    assert exit_code_for(errors.JobCancelledError("x")) == 5
    assert exit_code_for(errors.JobTimeoutError("x")) == EXIT_TIMEOUT
    assert exit_code_for(LogTimeout("x")) == EXIT_TIMEOUT
    assert exit_code_for(RuntimeError("x")) == 1
    # one base class carries the timeout's code (no class names compared); a job's timeout
    # is still a JobError for code that catches those
    assert issubclass(LogTimeout, errors.WaitTimeout) and errors.WaitTimeout.exit_code == 6
    assert issubclass(errors.JobTimeoutError, errors.JobError)


def test_unexpected_errors_have_no_traceback_without_debug(monkeypatch, capsys):
    import hpcui.cli.cmd_site as site

    def explode(args):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(site, "cmd_profiles", explode)
    assert main(["profiles"]) == 1
    err = capsys.readouterr().err
    assert "unexpected RuntimeError: kaboom" in err and "--debug" in err
    with pytest.raises(RuntimeError):
        main(["profiles", "--debug"])


def test_run_script_executes_source_as_main(capsys):
    from hpcui.node.runscript import run_script

    src = textwrap.dedent(
        """
        import sys
        print("name", __name__, "argv", sys.argv)
        if "--exit" in sys.argv:
            sys.exit(int(sys.argv[-1]))
        if "--raise" in sys.argv:
            raise KeyError("inside the script")
        """
    )
    argv_before = list(sys.argv)
    assert run_script(src, "train.py", ["--lr", "1"]) == 0
    assert "name __main__ argv ['train.py', '--lr', '1']" in capsys.readouterr().out
    assert run_script(src, "train.py", ["--exit", "0"]) == 0
    with pytest.raises(RuntimeError, match="exited with status 3"):
        run_script(src, "train.py", ["--exit", "3"])
    with pytest.raises(KeyError) as info:
        run_script(src, "train.py", ["--raise"])
    import traceback

    text = "".join(traceback.format_exception(info.value))
    assert 'raise KeyError("inside the script")' in text  # linecache: the script's own line
    assert sys.argv == argv_before and sys.modules["__main__"].__name__ == "__main__"


def test_load_function_from_a_file_travels_by_value(tmp_path):
    from hpcui.submission.pickling import _user_package
    from hpcui.submission.targets import load_function

    path = tmp_path / "jobfile_for_cli_test.py"
    path.write_text("def train(x):\n    return x * 2\n")
    fn = load_function(f"{path}:train")
    assert fn(21) == 42
    assert _user_package(fn) is not None  # the cluster needs none of the user's files


def test_table_has_no_colour_when_not_a_terminal(capsys):
    from hpcui.cli import output

    output.table(["A", "STATE"], [("1", "FAILED")], colours={1: "red"})
    text = capsys.readouterr().out
    assert "\x1b[" not in text and text.splitlines()[1].split() == ["1", "FAILED"]
    assert output.duration(90061) == "1-01:01:01" and output.size(1536) == "1.5K"


def test_bash_completion_completes_commands_options_and_choices(tmp_path):
    assert shutil.which("bash"), "bash is needed to test bash completion"
    path = tmp_path / "hpcui.bash"
    path.write_text(completion_script("bash"))

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        code = (
            f"source {path}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _hpcui; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        res = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True)
        return res.stdout.split()

    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    assert complete("hpcui", "su") == ["submit"]
    assert "--history" in complete("hpcui", "jobs", "--h")
    assert complete("hpcui", "-c", "dev", "submit", "--launcher", "t") == ["torchrun"]
    assert complete("hpcui", "completion", "f") == ["fish"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion(shell):
    text = completion_script(shell)
    for cmd in ("submit", "jobs", "logs", "completion"):
        assert cmd in text
    assert "hpcui clusters --names" in text
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: scripts/install-deps installs it"
    args = [exe, "-n"] if shell == "zsh" else [exe, "--no-execute"]
    res = subprocess.run([*args, "/dev/stdin"], input=text, text=True, capture_output=True)
    assert res.returncode == 0, res.stderr


def test_no_command_opens_the_app(monkeypatch):
    import hpcui.tui.app

    opened = []
    monkeypatch.setattr(hpcui.tui.app, "run_app", lambda cluster=None: opened.append(cluster))
    assert main([]) == 0 and main(["-c", "mn5"]) == 0
    assert opened == [None, "mn5"]


def test_profiles_lists_user_profiles_marked(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[profiles.mydev]\nbase = "dev"\npython = "/usr/bin/python3"\n'
        'description = "dev, our python"\n\n'
        '[profiles.pbsbox]\nscheduler = "pbs"\ngpus_per_node = 2\ngpu_directive = "ngpus"\n\n'
        '[profiles.lumi-g]\nbase = "lumi-g"\ncpus_per_gpu = 6\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    assert main(["profiles", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["mn5-acc"]["source"] == "built-in" and rows["mn5-acc"]["base"] is None
    assert rows["puhti"]["retired"] is True and rows["puhti"]["source"] == "built-in"
    mydev = rows["mydev"]
    assert (mydev["source"], mydev["base"], mydev["shadows_builtin"]) == ("user", "dev", False)
    assert mydev["gpus_per_node"] == 4 and mydev["partitions"] == ["cpu", "gpu"]
    assert (rows["pbsbox"]["source"], rows["pbsbox"]["base"], rows["pbsbox"]["scheduler"]) == (
        "user",
        None,
        "pbs",
    )
    assert rows["lumi-g"]["source"] == "user" and rows["lumi-g"]["shadows_builtin"] is True
    assert list(rows) == sorted(rows)  # one row per name, the user's where it shadows

    assert main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "SOURCE" in lines[0]
    line = {ln.split()[0]: ln for ln in lines[1:] if ln.strip()}
    assert "user (base dev)" in line["mydev"] and "built-in" in line["mn5-acc"]
    assert "user (changes built-in)" in line["lumi-g"]
    assert "(retired)" in line["puhti"] and "built-in" in line["puhti"]
    assert "user" in line["pbsbox"] and "base" not in line["pbsbox"]

    assert main(["profiles", "mydev", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["name"] == "mydev" and one["python"] == "/usr/bin/python3"
    assert main(["profiles", "lumi-g", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cpus_per_gpu"] == 6
    assert main(["profiles", "mydev"]) == 0
    out_text = capsys.readouterr().out
    assert "/usr/bin/python3" in out_text and "user (base dev)" in out_text


def test_script_uses_the_profile_python_when_the_cluster_sets_none(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[profiles.mydev]\nbase = "dev"\npython = "/opt/venv/bin/python"\n'
        'setup = ["source /opt/venv/bin/activate"]\n\n'
        '[clusters.mine]\nhost = "login.example"\nprofile = "mydev"\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    import hpcui.clusters.api

    monkeypatch.setattr(
        hpcui.clusters.api, "_clusters", {}
    )  # connect() caches clusters per process
    assert main(["script", "-c", "mine", "--json"]) == 0
    script = json.loads(capsys.readouterr().out)["script"]
    assert "/opt/venv/bin/python" in script and "source /opt/venv/bin/activate" in script


def test_partitions_of_a_pbs_server_show_its_queues(monkeypatch, capsys):
    """PBS's `qstat -Q` (a quoted PBS Pro output) through the real adapter and the CLI."""
    import hpcui.cli.cmd_site as site
    from hpcui.schedulers.pbs import PbsScheduler
    from tests.canned import CannedTransport, ok
    from tests.conftest import FIXTURES

    table = (FIXTURES / "pbs-constructed/pbspro_qstat_Q_thin.txt").read_text()
    sched = PbsScheduler(CannedTransport({"qstat -Q": ok(table)}, strict=True), dialect="pbspro")

    class PbsSite:
        name = "aspire"
        capabilities = sched.capabilities
        site = sched  # cluster.site.partitions(): the adapter's own answer

    monkeypatch.setattr(site, "connect", lambda name: PbsSite())
    assert main(["partitions", "-c", "aspire"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["QUEUE", "AVAIL", "KIND", "QUEUED", "RUNNING"]
    assert lines[4].split() == ["thin", "up", "exec", "95", "16"]
    assert main(["partitions", "-c", "aspire", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[3]["jobs_queued"] == 95 and rows[3]["nodes_total"] is None


def test_clusters_on_a_fresh_home_lists_local(tmp_path):
    """No config, no data directory: the table (not only --json) shows the embedded local."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "fresh"), "LANG": "C.UTF-8"}
    done = _cli("clusters", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "HOST", "PROFILE"]
    assert lines[1].split()[:2] == ["*", "local"] and "(this machine)" in lines[1]


def test_script_renders_offline_for_a_pbs_profile_that_knows_its_dialect(
    tmp_path, monkeypatch, capsys
):
    """ASPIRE 2A+ is PBS Pro: its profile says so, so nothing probes qstat; the host is a
    closed loopback port, so any connection attempt would fail the command."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[clusters.a2p]\nhost = "127.0.0.1"\nport = 1\nprofile = "aspire2a-plus"\n'
        'defaults = { account = "12345678" }\n'
    )
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    import hpcui.clusters.api

    monkeypatch.setattr(hpcui.clusters.api, "_clusters", {})
    assert main(["script", "-c", "a2p", "--gpus", "2", "--time", "1h"]) == 0
    script = capsys.readouterr().out
    assert "#PBS -l select=1:ncpus=28:ngpus=2" in script and "#PBS -P 12345678" in script
    assert "#PBS -l walltime=01:00:00" in script


def test_extra_takes_a_directive_with_its_dashes():
    """Issue 35, small ones: `--extra '--begin=now+600'` was an argparse error."""
    from hpcui.cli.parser import attach_dashed_values, build_parser

    argv = ["script", "--extra", "--begin=now+600", "--extra", "--mail-type=END", "--json"]
    args = build_parser().parse_args(attach_dashed_values(argv))
    assert args.res_extra == ["--begin=now+600", "--mail-type=END"] and args.json
    after = ["-c", "dev", "exec", "tool", "--extra", "-x"]  # a remote command: untouched
    assert attach_dashed_values(after) == after


def test_the_cli_and_the_app_colour_each_state_alike(monkeypatch):
    """Issue 37, 6: one palette (hpcui.common.formatting.STATE_PALETTE) for both faces: COMPLETED
    was green in the CLI and blue in the app. Each state's ANSI colour in `hpcui jobs` has
    the hue of the app's colour (a crude hue check: the app colour's strongest channel)."""
    import io

    from hpcui.backends.states import JobState
    from hpcui.cli import output as out
    from hpcui.tui.rows import STATE_STYLE

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr("sys.stdout", Tty())
    ansi_rgb = {"31": "r", "91": "r", "32": "g", "33": "rg", "34": "b", "94": "b",
                "35": "rb", "36": "gb", "90": "rgb"}  # fmt: skip
    for state in JobState:
        painted = out.state(state.value)
        code = painted.split("\x1b[", 1)[1].split("m", 1)[0]
        hexa = STATE_STYLE[state].split()[-1]
        r, g, b = (int(hexa[i : i + 2], 16) for i in (1, 3, 5))
        top = max(r, g, b)
        strong = "".join(c for c, v in zip("rgb", (r, g, b), strict=True) if v >= top - 0x30)
        assert set(strong) <= set(ansi_rgb[code]) or set(ansi_rgb[code]) <= set(strong), (
            state,
            hexa,
            code,
        )


def test_jobs_folds_an_array_into_one_row_unless_expanded(monkeypatch, capsys):
    """Issue 35, defect 4: 300 tasks of one array are one row (`401_[0-299]`, counted by
    state) as in the app; --expand lists each; the JSON keeps one object per task."""
    from types import SimpleNamespace

    import hpcui.cli.cmd_jobs as jobs_cmd
    from hpcui.backends.slurm.queue import parse_squeue
    from hpcui.backends.states import JobState
    from hpcui.sitestate.jobs import QueueJob
    from tests.conftest import FIXTURES

    captured = (FIXTURES / "slurm-22.05.8-dev/squeue_hpcui_format.txt").read_text()
    base = QueueJob.from_entry(parse_squeue(captured)[0])
    tasks = [
        base.model_copy(update={"job_id": f"401_{i}", "state": state, "hpcui": True})
        for i, state in enumerate([JobState.RUNNING] * 4 + [JobState.PENDING] * 296)
    ]
    other = base.model_copy(update={"job_id": "77", "hpcui": True})

    class Site:
        name = "dev"
        capabilities = SimpleNamespace(queue=True, history=True)
        site = SimpleNamespace(queue=lambda: [other, *tasks])

    monkeypatch.setattr(jobs_cmd, "connect", lambda name: Site())
    assert main(["jobs", "-c", "dev"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3  # header, job 77, the array
    assert lines[2].split()[0] == "401_[0-299]" and "RUNNING" in lines[2]
    assert "(4 running · 296 pending · 0 failed)" in lines[2]
    assert main(["jobs", "-c", "dev", "--expand"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 302
    assert main(["jobs", "-c", "dev", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 301


def test_jobs_of_all_users_asks_squeue_without_me_and_shows_who(monkeypatch, capsys, tmp_path):
    """Issue 35, defect 4: --all-users is squeue's view of the partitions (no --me), every
    job with its USER; the user's shared queue poll is not used for it."""
    import hpcui.cli.cmd_jobs as jobs_cmd
    from hpcui.config import ClusterConfig
    from hpcui.profiles import load_profile
    from hpcui.schedulers.slurm import SlurmScheduler
    from hpcui.sitestate.site import SiteView
    from hpcui.store.registry import Registry
    from tests.canned import CannedTransport, ok
    from tests.conftest import FIXTURES

    captured = (FIXTURES / "slurm-22.05.8-dev/squeue_hpcui_format.txt").read_text()
    transport = CannedTransport([ok(captured)])
    scheduler = SlurmScheduler(transport)
    view = SiteView(
        name="dev", config=ClusterConfig(name="dev", host="h"), profile=load_profile("dev"),
        transport=transport, scheduler=scheduler, registry=Registry(tmp_path / "r.sqlite"),
        setup=list, before_listing=lambda: None,
    )  # fmt: skip

    class Site:
        name = "dev"
        capabilities = scheduler.capabilities
        site = view

    monkeypatch.setattr(jobs_cmd, "connect", lambda name: Site())
    assert main(["jobs", "-c", "dev", "--all-users", "--expand"]) == 0
    [command] = transport.commands
    assert "squeue" in command and "--me" not in command
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["JOBID", "USER", "NAME"]
    assert all(line.split()[1] == "hpcuser" for line in lines[1:]) and len(lines) > 2
    assert main(["jobs", "-c", "dev", "--all-users", "--history", "1"]) == 2
    assert "leave out --history" in capsys.readouterr().err
