"""The local registry: records survive, ids reused by a scheduler never lose a job."""

from hpcui.backends.states import JobState
from hpcui.store.registry import JobRecord, Registry


def _submit(reg: Registry, token: str, job_id: str, n: int | None = None) -> None:
    idx = range(n) if n else [-1]
    reg.add([JobRecord(cluster="c", token=token, array_index=i, folder=f"/f/{token}") for i in idx])
    reg.set_job_ids("c", token, job_id, is_array=n is not None)


def test_reused_job_id_keeps_both_records(tmp_path):
    reg = Registry(tmp_path / "r.sqlite")
    _submit(reg, "old", "5")
    _submit(reg, "new", "5")  # a reinstalled controller hands out 5 again
    assert reg.get("c", "5").token == "new"
    (old,) = reg.by_token("c", "old")
    assert old.job_id is None and old.meta["reused_job_id"] == "5"
    assert reg.get("c", "5").state is JobState.PENDING


def test_reused_ids_inside_an_array(tmp_path):
    reg = Registry(tmp_path / "r.sqlite")
    _submit(reg, "a", "7", n=3)
    _submit(reg, "b", "7", n=2)
    assert [r.job_id for r in reg.by_token("c", "b")] == ["7_0", "7_1"]
    assert [r.job_id for r in reg.by_token("c", "a")] == [None, None, "7_2"]


def test_registry_survives_a_new_process(tmp_path):
    path = tmp_path / "r.sqlite"
    reg = Registry(path)
    _submit(reg, "t", "42")
    reg.close()
    assert Registry(path).get("c", "42").folder == "/f/t"
