"""Sweeps: one call over many configurations, named, resumable and read as one table.

`hpcui.sweep(fn, grid=..., name=...)` and `hpcui.get_sweep(cluster, name)` are the API;
`space` expands configurations, `store` keeps a sweep on this machine, `sweep` submits and
resumes it, `table` reads its results. It sits above clusters/ and metrics/: a sweep is
made of a cluster's jobs and read with the metrics reader.
"""
