"""From a callable to a job: request -> plan, pickles, runtime bundle, container
preparation, batch script, one upload and one submit, and recovery of cut-off submits."""
