import pytest

from hpcui.config import load_config
from hpcui.errors import ConfigError


def test_no_config_gives_the_embedded_local_cluster(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = load_config()
    local = cfg.cluster(None)
    assert local.name == "local" and local.is_local


def test_named_cluster_and_default(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('default = "x"\n[clusters.x]\nhost = "login.example"\nprofile = "dev"\n')
    cfg = load_config(p)
    assert cfg.cluster(None).host == "login.example"
    assert set(cfg.clusters) == {"x", "local"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("default = [", "not valid TOML"),
        ('[clusters.x]\nhots = "typo"\n', "hots"),
        ('default = "nope"\n', "names no"),
        ("clusters = 3\n", "must be a table"),
        ('[cluster.x]\nhost = "h"\n', "unknown top-level key"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, text, match):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(p)


def test_unknown_cluster_lists_known_ones(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[clusters.mn5]\nhost = "glogin1.bsc.es"\n')
    with pytest.raises(ConfigError, match="known: local, mn5"):
        load_config(p).cluster("lumi")


def test_missing_explicit_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCUI_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config()


USER_PROFILES = """
[profiles.mydev]
base = "dev"
python = "/opt/py/bin/python3"
setup = ["module load python/3.11"]

[clusters.a]
host = "login.example"
profile = "mydev"

[clusters.b]
host = "login.example"
profile = "mydev"
python = "/usr/bin/python3"
setup = []

[clusters.c]
host = "login.example"
profile = "dev"
"""


def test_user_profiles_reach_clusters_and_give_python_and_setup(tmp_path):
    from hpcui.clusters.cluster import Cluster

    p = tmp_path / "c.toml"
    p.write_text(USER_PROFILES)
    cfg = load_config(p)
    a, b, c = (Cluster(cfg.cluster(n)) for n in "abc")
    assert a.config.python is None and a.config.setup is None  # not set in the table
    assert a.profile.name == "mydev" and a.profile.gpus_per_node == 4
    assert (a.python, a.setup) == ("/opt/py/bin/python3", ["module load python/3.11"])
    assert (b.python, b.setup) == ("/usr/bin/python3", [])  # the cluster's own values win
    assert (c.python, c.setup) == ("python3", [])  # neither sets them
    # a copy of the cluster config (tests, the TUI) keeps the user profiles
    copy = cfg.cluster("a").model_copy(update={"setup": ["true"]})
    assert Cluster(copy).profile.name == "mydev" and Cluster(copy).setup == ["true"]


def test_submit_script_and_probe_use_the_effective_python(tmp_path):
    from hpcui.clusters.cluster import Cluster
    from hpcui.request.plan import batch_spec
    from hpcui.store.remote import probe_command

    p = tmp_path / "c.toml"
    p.write_text(USER_PROFILES)
    a = Cluster(load_config(p).cluster("a"))
    probe = probe_command(a.config, python=a.python, setup=a.setup)
    assert "module load python/3.11; /opt/py/bin/python3 -c" in probe
    spec = batch_spec(a.plan(), folder="/f", token="t", python=a.python, setup=a.setup)
    text = a.scheduler.render_script(spec)
    assert "module load python/3.11" in text and "/opt/py/bin/python3" in text


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[profiles.x]\nbase = "nope"\n', r"c\.toml: .*\[profiles\.x\]: base = 'nope'"),
        ('[profiles.x]\nbase = "y"\n[profiles.y]\nbase = "x"\n', r"\[profiles\.y\].*cycle"),
        ('[profiles.x]\nbase = "dev"\ncpus_per_gpu = "two"\n', r"\[profiles\.x\]: cpus_per_gpu"),
        ("[profiles.lumi-g]\ngpus_per_node = 4\n", r'base = "lumi-g"'),
        ("[profiles]\nx = 3\n", r"profiles\.x"),
    ],
)
def test_bad_user_profile_fails_at_load_naming_the_table(tmp_path, text, match):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(p)
