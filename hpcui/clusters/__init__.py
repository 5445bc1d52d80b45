"""One connected site assembled from its parts (``Cluster``), the module-level API
(``hpcui.connect``) and adding a cluster (onboarding)."""
