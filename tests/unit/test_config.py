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
