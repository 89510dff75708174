"""The local back-end: real processes on the cluster's own machines.

- ``executor``: ``LocalExecutor``, the round's launches sent to each node's queue, and GPU time counted;
- ``agent``: the node agent, a Celery worker on each GPU machine, that starts, resizes and stops a job's ranks;
- ``supervise``: the wrapper each rank runs under, which records how it ended.
"""
