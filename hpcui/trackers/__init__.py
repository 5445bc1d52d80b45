"""Experiment trackers on nodes without internet: the job writes offline into its folder
(hpcui.node.track_env), the client mirrors that folder incrementally (`mirror`, one
command per interval for all of a cluster's tracked jobs: `relay`) and hands the mirror to
the tracker on this machine, which has internet: MLflow's server (`mlflow_export`), W&B's
own `wandb sync` (`wandb_sync`), TensorBoard on the mirror."""
