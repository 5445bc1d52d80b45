"""The tiny test job of `hpcui add`: imports nothing, so it proves the connection, the
scheduler, the Python and hpcui's runtime on the cluster, and nothing else."""

from __future__ import annotations


def hello() -> str:
    return "hpcui works here"
