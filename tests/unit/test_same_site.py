"""Issue 35, defect 5: two cluster tables for one login (the same host, port and user as ssh
resolves them: one per Python environment, say) list the same `squeue --me`; each job shows once —
under the table that submitted it (the registry says which), any other under the site's
first table — and another site's tables are left alone."""

from __future__ import annotations

from hpcui.config import ClusterConfig
from hpcui.sitestate.same_site import one_per_site, records_to_show, shared_sites, site_of
from hpcui.store.registry import JobRecord
from tests.unit.test_tui import queue_jobs


def configs() -> dict[str, ClusterConfig]:
    return {
        "mn5": ClusterConfig(name="mn5", host="glogin1.bsc.es", user="bsc123"),
        "mn5-py312": ClusterConfig(name="mn5-py312", host="GLOGIN1.bsc.es", user="bsc123"),
        "mn5-other": ClusterConfig(name="mn5-other", host="glogin1.bsc.es", user="bsc999"),
        "lumi": ClusterConfig(name="lumi", host="lumi.csc.fi", user="me"),
    }


def test_a_site_is_where_ssh_lands(tmp_path):
    c = configs()
    assert site_of(c["mn5"]) == site_of(c["mn5-py312"]) != site_of(c["mn5-other"])
    assert shared_sites(c) == {site_of(c["mn5"]): ["mn5", "mn5-py312"]}
    # an ssh alias is its HostName/Port/User; a jump host is only the way there
    ssh = tmp_path / "ssh_config"
    ssh.write_text(
        "Host mn5 mn5-gw\n    HostName glogin1.bsc.es\n    User bsc123\n"
        "Host mn5-gw\n    ProxyJump gw.bsc.es\nHost other-port\n    HostName glogin1.bsc.es\n"
        "    User bsc123\n    Port 2222\n"
    )
    alias = ClusterConfig(name="a", host="mn5", ssh_config=str(ssh))
    jumped = ClusterConfig(name="j", host="mn5-gw", ssh_config=str(ssh))
    port = ClusterConfig(name="p", host="other-port", ssh_config=str(ssh))
    assert site_of(alias) == site_of(jumped) == site_of(c["mn5"]) != site_of(port)


def test_each_job_once_under_the_table_that_submitted_it():
    jobs = queue_jobs()
    ids = [j.job_id for j in jobs]
    mine = ids[1]  # submitted through the second table
    records = [
        JobRecord(cluster="mn5-py312", token="t", job_id=mine, folder="/x"),
        JobRecord(cluster="gone-from-config", token="u", job_id=ids[0], folder="/y"),
    ]
    listed = {"mn5": jobs, "mn5-py312": list(jobs), "mn5-other": jobs[:2], "lumi": jobs[:1]}
    out = one_per_site(listed, shared_sites(configs()), records)
    assert [j.job_id for j in out["mn5-py312"]] == [mine]
    assert [j.job_id for j in out["mn5"]] == [i for i in ids if i != mine]
    assert out["mn5-other"] == jobs[:2] and out["lumi"] == jobs[:1]  # other logins: as listed
    seen = [j.job_id for name in ("mn5", "mn5-py312") for j in out[name]]
    assert sorted(seen) == sorted(ids)  # nothing lost, nothing twice


def test_the_first_listed_table_takes_the_others_and_one_table_is_untouched():
    jobs = queue_jobs()
    groups = shared_sites(configs())
    out = one_per_site({"mn5-py312": jobs}, groups, [])
    assert out["mn5-py312"] == jobs  # mn5 not listed (not connected): nothing to share
    out = one_per_site({"mn5": jobs, "mn5-py312": jobs}, groups, [])
    assert out["mn5"] == jobs and out["mn5-py312"] == []


def test_a_job_of_a_table_not_connected_is_not_shown_twice():
    """Issue 49, defect 4: only `mn5` connected, a job submitted through `mn5-py312` was
    "mn5 399" from the queue and "mn5-py312 399" from the registry (which answered "not
    connected" when opened)."""
    jobs = queue_jobs()
    groups = shared_sites(configs())
    theirs = JobRecord(cluster="mn5-py312", token="t", job_id=jobs[1].job_id, folder="/x")
    ended = JobRecord(cluster="mn5-py312", token="u", job_id="999999", folder="/y")
    elsewhere = JobRecord(cluster="lumi", token="v", job_id=jobs[1].job_id, folder="/z")
    shown = records_to_show([theirs, ended, elsewhere], {"mn5": jobs}, groups)
    assert shown == [ended, elsewhere]  # the queue's row stands for it; others kept
    both = records_to_show([theirs], {"mn5": jobs, "mn5-py312": []}, groups)
    assert both == [theirs]  # its own table is listed: one_per_site places it
