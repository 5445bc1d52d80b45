"""PBS's dialect (PBS Pro / OpenPBS, Torque, Slurm's Torque wrappers): scripts, ids,
status, queues and nodes."""
