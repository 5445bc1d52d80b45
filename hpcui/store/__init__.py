"""What both submitting and following a job read and write: the local registry, the job
folder on the cluster (``remote``) and signed results. Below ``jobs/`` and ``submit/``."""
