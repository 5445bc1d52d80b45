import pytest

from backends.quota import QUOTA_COMMANDS
from hpcui.config import ClusterConfig
from hpcui.errors import ConfigError
from hpcui.profiles import Profile, builtin_profiles, load_profile

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
