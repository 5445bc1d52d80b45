"""Reading `hpcui add`'s look at a login node (captured on both dev sites): the scheduler,
the partitions' shapes, the profile they suggest and a Python of the wanted version."""

from __future__ import annotations

import pytest

from hpcui.clusters import onboarding
from hpcui.errors import UsageError
from tests.conftest import FIXTURES

PROBES = FIXTURES / "onboarding"


@pytest.mark.parametrize(
    ("site", "python", "setup"),
    [
        ("hpcui-dev", "/usr/bin/python3", []),
        ("hpcui-dev24", "python3", ["module load python/3.11"]),
    ],
)
def test_a_site_read_from_its_probe(site, python, setup):
    facts = onboarding.parse_probe((PROBES / f"probe_{site}.txt").read_text())
    assert facts.scheduler == "slurm"
    assert facts.partitions == {"cpu": (8, 4), "gpu": (8, 4)}
    assert onboarding.suggest_profile(facts, site)[0] == "dev"
    found, lines, _ = onboarding.match_python(facts, want="3.11")
    assert (found, lines) == (python, setup)


def test_module_names_that_are_not_plain_are_never_proposed():
    text = (
        (PROBES / "probe_hpcui-dev24.txt")
        .read_text()
        .replace("python/3.11\n", "python/3.11;touch${IFS}x\npython/3.11\n")
    )
    facts = onboarding.parse_probe(text)
    assert facts.python_modules == ["python/3.11"]


def test_a_probe_cut_short_is_an_error_not_an_empty_site():
    text = (PROBES / "probe_hpcui-dev.txt").read_text().split("@@hpcui-probe@@ end")[0]
    with pytest.raises(UsageError, match="did not answer"):
        onboarding.parse_probe(text)


def test_an_unknown_slurm_site_gets_the_generic_profile():
    facts = onboarding.SiteFacts(scheduler="slurm", partitions={"main": (128, 0)})
    assert onboarding.suggest_profile(facts, "login.example")[0] == "generic"
    pbs = onboarding.SiteFacts(scheduler="pbs", queues=["workq"])
    with pytest.raises(UsageError, match="--profile"):
        onboarding.suggest_profile(pbs, "login.example")
