"""Slurm's dialect: batch scripts, ids, the queue, accounting and partitions, control."""
