"""Code that runs on the compute node (standard library and submitit only)."""
