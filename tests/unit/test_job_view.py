"""One job view built in the core (hpcui.clusters.job_view): what `hpcui show` prints and the
Job screen's details draw, from captured scheduler outputs; one handle protocol that hpcui's
jobs and every other job of the user satisfy; Cluster's own names are the user's API."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

from hpcui.backends.slurm.accounting import parse_sacct
from hpcui.backends.slurm.control import parse_show_job
from hpcui.backends.slurm.queue import parse_squeue
from hpcui.backends.states import JobState
from hpcui.clusters.cluster import Cluster
from hpcui.clusters.job_view import JobView, assemble
from hpcui.jobs.handle import JobHandle
from hpcui.jobs.job import Job
from hpcui.jobs.other import OtherJob
from hpcui.schedulers.base import JobStatus
from hpcui.sitestate.jobs import HistoryJob, QueueJob
from hpcui.store.registry import JobRecord
from tests.canned import CannedTransport
from tests.conftest import fixture_text

SACCT = fixture_text("slurm-22.05.8-dev/sacct_hpcui_format.txt")
SQUEUE = fixture_text("slurm-22.05.8-dev/squeue_hpcui_format.txt")
PENDING = fixture_text("slurm-22.05.8/scontrol_show_job_o_pending.txt")


def _record(job_id: str, state: JobState = JobState.RUNNING) -> JobRecord:
    return JobRecord(
        cluster="dev", token="5f0c2a9e41b7", job_id=job_id, name="train", folder="/h/.hpcui/jobs/t",
        num_tasks=4, state=state, submitted_at=datetime(2026, 11, 1, 9, 0).timestamp(),
        meta={"container": "enroot /img.sqsh"},
    )  # fmt: skip


def _ended() -> HistoryJob:
    return next(HistoryJob.from_entry(e) for e in parse_sacct(SACCT) if e.state.is_final)


def test_an_ended_job_says_the_accountings_word_once() -> None:
    acct = _ended()
    view = assemble("dev", acct.job_id, record=_record(acct.job_id), accounting=acct)
    fields = dict(view.fields())
    assert view.state is acct.state and view.hpcui_job  # sacct's word beats the stale record
    assert fields["state"].startswith(acct.state.value)
    assert fields["tasks"] == "4" and fields["container"] == "enroot /img.sqsh"
    assert fields["exit code"].startswith(str(acct.exit_code))
    assert "efficiency" in fields and "ended" in fields
    labels = [label for label, _ in view.fields()]
    assert len(labels) == len(set(labels))  # each thing once (the screen's defect of old)
    assert view.reason == ""  # an ended job waits for nothing


def test_a_queued_job_shows_the_queues_row() -> None:
    row = QueueJob.from_entry(next(e for e in parse_squeue(SQUEUE)))
    view = assemble("dev", row.job_id, record=_record(row.job_id), queue=row)
    fields = dict(view.fields())
    assert view.state is row.state and view.queue == row
    assert fields["partition"] == row.partition
    assert "exit code" not in fields and "ended" not in fields


def test_a_job_hpcui_did_not_submit_says_so_and_where_its_logs_are() -> None:
    (details,) = parse_show_job(PENDING)
    view = assemble("dev", details.job_id, details=details)
    fields = dict(view.fields())
    assert not view.hpcui_job and view.details == details
    assert fields["job"].endswith("(not submitted by hpcui)")
    assert fields["state"].startswith("PENDING") and fields["reason"] == details.reason
    assert "tasks" not in fields and "folder" not in fields and "token" not in fields
    assert fields["stdout"] == details.stdout


def test_the_view_is_the_show_commands_json_model() -> None:
    from hpcui.cli.models import ShowOutput

    assert ShowOutput is JobView
    acct = _ended()
    data = assemble("dev", acct.job_id, record=_record(acct.job_id), accounting=acct)
    again = JobView.model_validate_json(data.model_dump_json())
    assert again == data


def test_both_handles_satisfy_one_protocol() -> None:
    transport = CannedTransport({}, strict=True)
    (details,) = parse_show_job(PENDING)
    other = OtherJob(details, cluster="dev", transport=transport, scheduler=None)  # type: ignore[arg-type]
    running = JobStatus(JobState.RUNNING, "RUNNING", None, "")
    host = SimpleNamespace(name="dev", status=SimpleNamespace(get=lambda job_id: running))
    job = Job(host, "42", "/h/.hpcui/jobs/t", num_tasks=2, name="train")  # type: ignore[arg-type]
    for handle in (job, other):
        assert isinstance(handle, JobHandle)
    assert job.hpcui_job and job.details is None and job.num_tasks == 2
    assert not other.hpcui_job and other.details is details and other.num_tasks == 1
    assert other.name == details.name and other.reason == details.reason


def test_the_protocol_check_sees_a_handle_that_is_not_one() -> None:
    class NotAHandle:
        job_id = "1"

    assert not isinstance(NotAHandle(), JobHandle)


#: Cluster's own names: the user's API and the parts a caller may hand in (transport,
#: scheduler, registry); the faces' plumbing is behind `faces` (hpcui.clusters.face_support)
CLUSTER_API = {
    "submit", "map", "map_calls", "plan", "preview_script", "estimate_start", "job", "get_job",
    "view", "relay",
    "will_finish", "running_finishes", "logs", "records",
    "site", "control", "files", "usage", "clean", "environments", "run", "close", "capabilities",
    "profile", "right_size", "cost",
    "python", "setup", "remote_info", "faces",
    "transport", "scheduler", "registry", "status", "submitter",
}  # fmt: skip


def test_clusters_public_names_are_the_users_api() -> None:
    public = {n for n in dir(Cluster) if not n.startswith("_")}
    assert public == CLUSTER_API
    for gone in ("record", "track", "job_status", "remember", "own_transport", "refresh_states"):
        assert not hasattr(Cluster, gone)
