import pytest

from hpcui.backends.quota import QUOTA_COMMANDS
from hpcui.config import ClusterConfig
from hpcui.errors import ConfigError
from hpcui.profiles import Profile, builtin_profiles, load_profile, resolve_profile

SITES = [
    "mn5-acc",
    "mn5-gpp",
    "jureca-dc",
    "juwels-booster",
    "lumi-g",
    "puhti",
    "mahti",
    "aspire2a-plus",
    "dev",
    "local",
]


def test_every_named_profile_ships():
    assert set(SITES) <= set(builtin_profiles())
    for name in builtin_profiles():
        assert load_profile(name).name == name


@pytest.mark.parametrize("name", builtin_profiles())
def test_unconfirmed_entries_name_real_values(name):
    """Every [?] path points at a value, so the user knows exactly what to override."""
    profile = load_profile(name)
    data = profile.model_dump()
    for path in profile.unconfirmed:
        node = data
        for key in path.split("."):
            assert isinstance(node, dict) and key in node, f"{name}: {path}"
            node = node[key]


@pytest.mark.parametrize("name", builtin_profiles())
def test_quota_command_is_one_hpcui_can_parse(name):
    q = load_profile(name).quota_command
    assert q is None or q in dict(QUOTA_COMMANDS)


def test_site_facts():
    acc = load_profile("mn5-acc")
    assert (acc.gpus_per_node, acc.cores_per_node, acc.gpu_cores, acc.mem_per_node) == (
        4,
        80,
        20,
        512 * 1024,
    )
    assert acc.login_hosts == ["alogin1.bsc.es", "alogin2.bsc.es"]
    assert len(acc.transfer_hosts) == 4 and acc.qos_prefix == "acc_" and not acc.partitions
    assert load_profile("mn5-gpp").login_hosts == ["glogin1.bsc.es", "glogin2.bsc.es"]
    assert load_profile("juwels-booster").interconnect_suffix == "i"
    assert load_profile("jureca-dc").torchrun == "torchrun_jsc"
    lumi = load_profile("lumi-g")
    assert lumi.env["NCCL_SOCKET_IFNAME"] == "hsn" and lumi.gpu_directive == "gpus-per-node"
    small = lumi.partitions["small-g"].billing
    assert (small.factor, small.cores_per_unit, small.mem_per_unit) == (0.5, 8, 64 * 1024)
    assert lumi.partitions["standard-g"].billing.per_node == 4
    assert lumi.partitions["dev-g"].max_time == 3 * 3600
    assert load_profile("puhti").retired and load_profile("mahti").retired
    assert not load_profile("lumi-g").retired
    pbs = load_profile("aspire2a-plus")
    assert pbs.scheduler == "pbs" and pbs.gpu_directive == "ngpus"
    assert pbs.partitions["normal"].routes_to == ["aidev", "aiq1", "aiq2"]
    assert pbs.partitions["aiq2"].max_time == 120 * 3600


def test_overrides_merge_tables_and_replace_values():
    lumi = load_profile(
        "lumi-g",
        {
            "partitions": {"small-g": {"max_time": "1h"}, "ju-g": {"gpu": True}},
            "requires_account": False,
        },
    )
    small = lumi.partitions["small-g"]
    assert small.max_time == 3600 and small.max_nodes == 4 and small.billing.factor == 0.5
    assert list(lumi.partitions) == ["small-g", "standard-g", "dev-g", "ju-g"]
    assert lumi.partitions["ju-g"].name == "ju-g"
    assert not lumi.requires_account
    assert load_profile("lumi-g").requires_account  # the built-in is untouched


def test_overrides_are_checked():
    with pytest.raises(ConfigError, match=r"profile_overrides for 'dev'.*gpus_per_nod"):
        load_profile("dev", {"gpus_per_nod": 8})
    with pytest.raises(ConfigError, match="max_time"):
        load_profile("dev", {"partitions": {"gpu": {"max_time": "soon"}}})


def test_routes_must_name_known_queues():
    with pytest.raises(ValueError, match="routes to unknown"):
        Profile(name="x", partitions={"normal": {"routes_to": ["nope"]}})


def test_unknown_profile_lists_known():
    with pytest.raises(ConfigError, match=r"known: .*lumi-g"):
        load_profile("nope")


def test_cluster_config_carries_overrides():
    cfg = ClusterConfig(
        name="lumi", host="lumi.csc.fi", profile="lumi-g", profile_overrides={"cpus_per_gpu": 6}
    )
    assert load_profile(cfg.profile, cfg.profile_overrides).gpu_cores == 6


# -- user profiles ([profiles.NAME]) ---------------------------------------------------------


def test_user_profile_based_on_a_builtin_deep_merges():
    user = {
        "mylumi": {
            "base": "lumi-g",
            "description": "LUMI with our reservation",
            "partitions": {"small-g": {"max_time": "2-00:00:00"}, "resv": {"gpu": True}},
            "python": "/project/venv/bin/python",
            "setup": ["module load LUMI/24.03"],
        }
    }
    p = resolve_profile("mylumi", user)
    base = load_profile("lumi-g")
    assert p.name == "mylumi" and p.description == "LUMI with our reservation"
    assert p.partitions["small-g"].max_time == 2 * 86400
    assert p.partitions["small-g"].billing == base.partitions["small-g"].billing  # merged
    assert p.partitions["resv"].gpu and "standard-g" in p.partitions
    assert (p.gpus_per_node, p.cpus_per_gpu, p.env) == (8, 7, base.env)
    assert p.python == "/project/venv/bin/python" and p.setup == ["module load LUMI/24.03"]
    # a cluster's profile_overrides still go on top
    assert resolve_profile("mylumi", user, {"cpus_per_gpu": 6}).gpu_cores == 6


def test_user_profile_chain_and_full_profile():
    user = {
        "site": {"scheduler": "pbs", "gpus_per_node": 2, "gpu_directive": "ngpus"},
        "site-big": {"base": "site", "gpus_per_node": 8},
    }
    full = resolve_profile("site", user)
    assert (full.name, full.scheduler, full.gpus_per_node, full.python) == ("site", "pbs", 2, None)
    big = resolve_profile("site-big", user)
    assert (big.scheduler, big.gpus_per_node, big.gpu_directive) == ("pbs", 8, "ngpus")
    # built-ins are still found when user profiles exist
    assert resolve_profile("dev", user).name == "dev"


def test_user_profile_shadows_a_builtin_only_with_its_own_base():
    changed = resolve_profile("dev", {"dev": {"base": "dev", "cpus_per_gpu": 1}})
    assert changed.name == "dev" and changed.cpus_per_gpu == 1 and changed.gpus_per_node == 4
    with pytest.raises(ConfigError, match=r"\[profiles\.dev\].*built-in.*base = \"dev\""):
        resolve_profile("dev", {"dev": {"gpus_per_node": 1}})


@pytest.mark.parametrize(
    ("user", "name", "match"),
    [
        (
            {"a": {"base": "nope"}},
            "a",
            r"\[profiles\.a\]: base = 'nope'.*known: .*lumi-g.*Fix `base`",
        ),
        ({"a": {"base": "b"}, "b": {"base": "a"}}, "a", r"cycle \(a -> b -> a\)"),
        ({"a": {"base": "a"}}, "a", r"\[profiles\.a\]: base = 'a' names the table itself"),
        ({"a": {"base": 3}}, "a", r"\[profiles\.a\]: base must be a profile name"),
        ({"a": {"base": "dev", "gpus_per_nod": 2}}, "a", r"\[profiles\.a\]: gpus_per_nod"),
        ({"a": {"base": "dev", "cpus_per_gpu": "many"}}, "a", r"\[profiles\.a\]: cpus_per_gpu"),
        ({"a": {"scheduler": "lsf"}}, "a", r"\[profiles\.a\]: scheduler"),
        ({"a": {"base": "dev"}}, "zzz", r"profile 'zzz'.*yours: a.*\[profiles\.zzz\]"),
    ],
)
def test_user_profile_errors_name_the_table_and_fix(user, name, match):
    with pytest.raises(ConfigError, match=match):
        resolve_profile(name, user)


def test_builtin_profiles_leave_python_and_setup_unset():
    # SITES.md names no site's Python: built-ins suggest nothing, cluster/user configs do
    for name in builtin_profiles():
        p = load_profile(name)
        assert p.python is None and p.setup == [], name
