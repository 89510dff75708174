"""The Kubernetes back-end: ``kubernetes-observer`` (Kubernetes schedules, the console mirrors its Jobs and pods).

``client`` talks to the API server; ``records`` reads its Nodes, Jobs and pods; ``observer`` mirrors them.
"""
