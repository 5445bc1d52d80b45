"""`hpcui add`'s table (hpcui.clusters.onboarding.write_table): whatever a value holds, the table
reads back as written, a dotted name stays one cluster, and a symlinked config stays a
link (the adversarial run: `add a.b` and a newline or ESC in a value failed naming a
temporary file; a symlinked config was replaced by a regular file)."""

from __future__ import annotations

from hpcui.clusters.onboarding import write_table
from hpcui.config import ClusterConfig, load_config


def test_a_dotted_name_and_control_characters_read_back_as_written(tmp_path):
    path = tmp_path / "config.toml"
    setup = ['module load "python/3.11"', "echo a\\b", "one\ntwo", "red\x1b[31m", "tab\there"]
    write_table(path, ClusterConfig(name="a.b", host="login.example.org", setup=setup))
    write_table(path, ClusterConfig(name="c-d_e", host="h2"))
    cfg = load_config(path)
    assert {"a.b", "c-d_e"} <= set(cfg.clusters) and cfg.default == "a.b"  # and the embedded local
    assert cfg.cluster("a.b").setup == setup
    assert not [p for p in tmp_path.iterdir() if p.name != "config.toml"]  # no temp left


def test_a_symlinked_config_stays_a_link_and_its_target_gets_the_table(tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "hpcui.toml"
    target.write_text('default = "x"\n\n[clusters.x]\nhost = "h"\n')
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    write_table(link, ClusterConfig(name="y", host="h2"))
    assert link.is_symlink() and link.resolve() == target
    assert {"x", "y"} <= set(load_config(target).clusters)
