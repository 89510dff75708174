"""Slurm as a cluster back-end: the console schedules and Slurm executes, or Slurm schedules and the console
watches.

- ``client``: the one way to talk to Slurm — slurmrestd (JWT, one adapter per REST version, chosen from the
  server's ``/openapi``) and the ``scontrol``/``sacct`` commands where REST lacks a verb (placing a job on
  given nodes, requeue, per-run accounting). Every call has a timeout; ``SlurmUnavailable`` means Slurm did
  not answer (the round is skipped), ``SlurmRefused`` that it answered no (the error names the call).
- ``inventory``: Slurm's nodes, GPU types and counts (GRES) and node states → the console's ``Node``/``Gpu``
  rows; a drained or down node's GPUs are lost, so the round moves or preempts their jobs.
- ``executor``: ``SlurmExecutor``, the round's decisions carried out as held, requeueable Slurm jobs placed on
  exactly the decided nodes and GPU counts; a rescale is checkpoint → requeue → resize → release.
- ``observer``: ``SlurmObserver``, the same seam changing nothing in Slurm: jobs mirrored from Slurm.
- ``accounting``: GPU-seconds per job from ``sacct`` (every run of a requeued job), against the console's.
"""
