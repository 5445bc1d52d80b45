"""The Textual app (a face: it shows what Cluster gives it, nothing more)."""
