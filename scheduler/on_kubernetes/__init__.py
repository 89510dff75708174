"""The console on a Kubernetes cluster, above the Kubernetes back-end: setting the console up from what the cluster
has (``setup``: ``make run`` with ``CLUSTER_BACKEND=kubernetes``)."""
