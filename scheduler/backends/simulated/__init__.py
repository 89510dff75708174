"""The simulated back-end: the demo cluster, and any cluster without real workers (``executor``)."""
