"""A job once it exists: its handle (ours or any other of the user's), its state,
control, files, usage, the end pushed from the login node, and cleaning up."""
