"""The app's screens, one per mode: jobs, job, submit, cluster."""
