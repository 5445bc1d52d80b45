"""What a scheduler's own words say about a job that ended without a result.

When a job never started (its node could not launch it) or was ended from outside, its
stderr is empty and the scheduler's reason and exit code are all there is: these turn
them into a sentence with the next step. Pure: records in, text out.
"""

from __future__ import annotations

from hpcui.backends.records import JobDetails

#: Slurm's Reason values for a job that failed to start or lost its node, and what to do
_SLURM = {
    "JobLaunchFailure": (
        "its node could not launch it (often an output file or working directory it cannot "
        "create or write, a missing executable or a prolog error)"
    ),
    "NodeFail": "a node of the job failed",
    "NodeDown": "a node of the job went down",
    "Prolog": "the site's prolog failed on its node",
    "PrologFailure": "the site's prolog failed on its node",
    "BadConstraints": "its constraints can never be met",
    "SystemFailure": "Slurm itself failed (slurmctld or slurmd)",
}
#: Slurm's exit code of a batch job its node could not launch (Slurm 22.05 adds
#: Reason=JobLaunchFailure; 24.11 says only Reason=RaisedSignal:53(Real-time_signal_19)):
#: both seen on the dev sites with an output folder the user may not write
LAUNCH_FAILED = "0:53"
#: PBS Pro's negative Exit_status: the job was never run to its end by its own script
_PBS = {
    "-1": "PBS could not start it (JOB_EXEC_FAIL1: before its files were set up)",
    "-2": "PBS could not start it (JOB_EXEC_FAIL2: after its files were set up)",
    "-3": "PBS could not start it and gave up retrying (JOB_EXEC_RETRY)",
    "-4": "it was aborted when its MOM restarted (JOB_EXEC_INITABT)",
    "-10": "PBS could not set up its user or group on the node (JOB_EXEC_FAILUID)",
    "-14": "a sister MOM of the job failed (JOB_EXEC_RERUN_SIS_FAIL)",
    "-20": "its mother superior lost its connection (JOB_EXEC_RERUN_MS_FAIL)",
    "-22": "a site hook failed (JOB_EXEC_HOOKERROR)",
}


def scheduler_words(details: JobDetails, scheduler: str) -> str:
    """ "Slurm ended it with reason JobLaunchFailure, exit code 0:53: its node could not
    launch it (...)" — or "" when the scheduler says nothing beyond the state."""
    reason = details.reason if details.reason not in ("", "None", "(null)") else ""
    code = details.exit_code if details.exit_code not in ("", "0:0") else ""
    if not (reason or code):
        return ""
    said = ", ".join(p for p in (reason and f"reason {reason}", code and f"exit code {code}") if p)
    meaning = _SLURM.get(reason.split(" ")[0], "") if reason else ""
    if not meaning and code == LAUNCH_FAILED:
        meaning = _SLURM["JobLaunchFailure"]
    if not meaning and code:
        meaning = _PBS.get(code, "")
    return f"{scheduler} ended it with {said}" + (f": {meaning}" if meaning else "")
