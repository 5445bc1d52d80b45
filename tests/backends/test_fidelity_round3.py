"""Real-world fidelity, round 3: Lmod's extensions in `module keyword`, Environment
Modules 5's variants in `module list`, an older Slurm's `Name=`, and every parser's
refusal, naming the field, of a layout that lacks what hpcui reads. Fixtures from real
sources (each folder's SOURCE.md)."""

from __future__ import annotations

import json

import pytest

from hpcui.backends import modules as mod
from hpcui.backends.pbs import nodes as pbs_nodes
from hpcui.backends.pbs import queues as pbs_queues
from hpcui.backends.pbs import status as pbs_status
from hpcui.backends.required_fields import MissingFields
from hpcui.backends.slurm import accounting, control, free, partitions, queue
from hpcui.backends.states import JobState
from tests.conftest import fixture_text

LMOD = "lmod-rt-extensions"
EM5 = "envmodules5-list"

# --- Lmod: extensions are not loadable names ------------------------------------------


def keyword_answer(spiders: dict[str, str]) -> str:
    """What `keyword_command` prints on the login node: keyword, the defaults, then the
    spider answer of each extension it found."""
    out = fixture_text(f"{LMOD}/keyword_numpy.txt") + f"{mod.DEFAULTS_MARK}\n"
    for name, text in spiders.items():
        out += f"{mod.EXTENSION_MARK} {name}\n{text}"
    return out


def test_keyword_reports_extensions_with_their_providers():
    text = keyword_answer({"numpy/1.16.4": fixture_text(f"{LMOD}/spider_numpy_1.16.4.txt")})
    found = {m.full_name: m for m in mod.parse_lmod_keyword(text)}
    assert set(found) == {"numpy/1.12", "numpy/1.16.4"}  # never "numpy/1.12 (E)"
    assert all(m.extension and "(E)" not in m.full_name for m in found.values())
    assert found["numpy/1.16.4"].extension_of == (
        "python2/2.7.14",
        "python2/2.7 (intel/11.2)",
        "python2/2.7 (intel/11.0)",
        "python2/2.7 (gcc/4.2.5)",
        "python2/2.7 (gcc/4.2.3)",
    )
    assert found["numpy/1.12"].extension_of == ()  # spider not asked: said as unknown
    label = mod.module_label(found["numpy/1.16.4"])
    assert label.startswith("numpy/1.16.4 (an extension; module load python2/2.7.14 or ")


def test_keyword_command_asks_spider_of_each_extension_in_one_round_trip(tmp_path):
    """The login node's side, run by a real sh with `module` as Lmod's keyword gold."""
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "kw").write_text(fixture_text(f"{LMOD}/keyword_numpy.txt"))
    (tmp_path / "sp").write_text(fixture_text(f"{LMOD}/spider_numpy_1.16.4.txt"))
    module = (  # a replay of Lmod's answers (this machine has no Lmod of this tree)
        f'case "$2" in keyword) cat {tmp_path}/kw;; spider) [ "$3" = numpy/1.16.4 ] && '
        f"cat {tmp_path}/sp;; *) :;; esac"
    )
    cmd = mod.keyword_command("lmod", "numpy").replace(
        "bash -lc ", "bash -c "
    )  # no login files here
    script = f"module() {{ {module}; }}; export -f module; " + cmd
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    found = {m.full_name: m for m in mod.parse_lmod_keyword(out.stdout)}
    assert found["numpy/1.16.4"].extension_of[0] == "python2/2.7.14", out.stdout
    assert found["numpy/1.12"].extension


# --- Environment Modules 5: variants out of the version ------------------------------


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("list_variants_symbol.txt", {"variant/1.0": {"bar": "val2", "foo": "val1"},
                                      "variant/2.0": {"baz": "val3"}}),
        ("list_j_variants_symbol.json", {"variant/1.0": {"bar": "val2", "foo": "val1"},
                                         "variant/2.0": {"baz": "val3"}}),
        ("list_variant_boolean_on.txt", {"variant/1.0": {"foo": "on"}}),
        ("list_variant_boolean_off.txt", {"variant/1.0": {"foo": "off"}}),
        ("list_tags.txt", {"foo/2.0": {}, "impreq/load": {}, "impreq/prereq": {}}),
    ],
)  # fmt: skip
def test_a_list_with_variants_is_read_as_its_json_is(name, want):
    got = mod.parse_envmodules_list(fixture_text(f"{EM5}/{name}"))
    assert {m.full_name: m.variants for m in got} == want
    assert all(m.loaded and "{" not in (m.version or "") for m in got)
    assert [m.version for m in got if m.name == "variant"] == [
        k.split("/")[1] for k in want if k.startswith("variant/")
    ]


def test_text_and_json_lists_agree():
    text = mod.parse_envmodules_list(fixture_text(f"{EM5}/list_variants_symbol.txt"))
    js = mod.parse_envmodules_list(fixture_text(f"{EM5}/list_j_variants_symbol.json"))
    assert [(m.full_name, m.variants) for m in text] == [(m.full_name, m.variants) for m in js]
    assert mod.module_label(text[0]) == "variant/1.0{bar=val2:foo=val1}"


def test_the_legend_is_never_a_module():
    for name in ("list_variants_symbol.txt", "list_variant_boolean_on.txt", "list_tags.txt"):
        names = [m.full_name for m in mod.parse_list(fixture_text(f"{EM5}/{name}"))]
        assert not any(n.startswith(("{", "<", "Key")) for n in names), names


# --- Slurm: the older key, and a record hpcui cannot read ---------------------------


def test_slurm_2_2_name_is_the_job_name():
    [job] = control.parse_show_job(fixture_text("slurm-2.2-show-job/show_job_oneliner.txt"))
    assert (job.job_id, job.name, job.user, job.state) == (
        "4242", "train.sh", "alice", JobState.RUNNING,
    )  # fmt: skip
    assert job.work_dir == "/home/alice" and job.nodelist == "node[1-2]"


def test_a_show_job_record_without_its_state_names_it():
    line = fixture_text("slurm-2.2-show-job/show_job_oneliner.txt").replace("JobState=RUNNING ", "")
    with pytest.raises(MissingFields, match=r"`scontrol show job` record has no JobState"):
        control.parse_show_job(line)


def test_sacct_with_jobidraw_for_jobid_names_the_column():
    fields = ("JobIDRaw", "JobName", "State")
    with pytest.raises(MissingFields) as err:
        accounting.parse_sacct("77|train|COMPLETED\n", fields)
    said = str(err.value)
    assert "sacct output has no JobID" in said and "JobIDRaw (not read by hpcui)" in said
    assert "not a Slurm job id" not in said


def test_squeue_without_a_state_column_names_it():
    with pytest.raises(MissingFields, match="squeue output has no State"):
        queue.parse_squeue("77|train|\n", ("JobID", "Name"))


def test_positional_slurm_parsers_name_the_fields_they_expected():
    with pytest.raises(ValueError, match=r"expected 7 '\|'-separated fields"):
        partitions.parse_sinfo("debug*|up|1:00:00\n")
    with pytest.raises(ValueError, match=r"expected 8 '\|'-separated fields"):
        free.parse_sinfo_nodes("node1|debug*|idle|\n")
    with pytest.raises(ValueError, match=r"accounting.*|expected 14"):
        control.parse_accounting("77|77|train\n")
    with pytest.raises(ValueError, match=r"sshare printed 3 fields .* \(Account, User, "):
        free.parse_sshare("acct|alice|1\n")
    with pytest.raises(ValueError, match=r"sprio printed 2 fields .*\(%i, %u, "):
        free.parse_sprio("77|alice\n")


# --- PBS and Environment Modules JSON ---------------------------------------------------


def test_a_pbs_job_without_its_state_names_it():
    doc = {"Jobs": {"7.pbs": {"Job_Name": "train", "queue": "workq"}}, "pbs_version": "23"}
    with pytest.raises(MissingFields, match=r"record of job 7\.pbs has no job_state"):
        pbs_status.parse_qstat_json(json.dumps(doc))


def test_pbsnodes_without_a_state_names_it():
    doc = {"nodes": {"n1": {"resources_available": {"ncpus": 4}}}}
    with pytest.raises(MissingFields, match="record of n1 has no state"):
        pbs_nodes.parse_pbsnodes_json(json.dumps(doc), ["workq"])


def test_qstat_q_without_its_enabled_column_names_it():
    table = "Queue              Max   Tot Str   Que   Run   Hld   Wat   Trn   Ext Type\n" \
            "---------------- ----- ----- --- ----- ----- ----- ----- ----- ----- ----\n" \
            "workq                0     0 yes     0     0     0     0     0     0 Exec\n"  # fmt: skip
    with pytest.raises(MissingFields, match=r"`qstat -Q` table has no Ena"):
        pbs_queues.parse_qstat_q(table)


def test_envmodules_json_without_a_name_names_it():
    with pytest.raises(MissingFields, match="Environment Modules JSON entry has no name"):
        mod.parse_envmodules_json('{"a/1": {"type": "modulefile", "tags": []}}')
