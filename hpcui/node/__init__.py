"""Code that runs on the compute node: the signed runner, torchrun's agent, PBS's per-rank
runner, time-limit signals, local GPU slots. Standard library, submitit and backends only
(it travels in the runtime bundle); the public ``hpcui.distributed`` is its library."""
