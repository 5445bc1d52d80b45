"""A job's logs on this machine: offset-based following and pushed following."""
