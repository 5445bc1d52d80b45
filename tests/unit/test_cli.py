"""Headless CLI basics: fast help, clear errors, --json."""

import json
import subprocess
import sys

from hpcui.cli import main


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys; from hpcui.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('paramiko', 'textual', 'torch', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_clusters_json_lists_local(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[clusters.mn5]\nhost = "glogin1.bsc.es"\nprofile = "dev"\n')
    monkeypatch.setenv("HPCUI_CONFIG", str(cfg))
    assert main(["clusters", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {"local", "mn5"}
    assert next(r for r in rows if r["name"] == "local")["default"] is True


def test_user_error_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HPCUI_CONFIG", str(tmp_path / "missing.toml"))
    assert main(["clusters"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcui: Config file") and "Traceback" not in err
