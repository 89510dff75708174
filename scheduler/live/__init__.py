"""The live scheduling round, one module per seam.

``config``: the settings row and the ``SchedulingConfig`` it gives. ``lease``: one round at a time across
workers. ``snapshot``: database rows → the core's ``ClusterSnapshot`` (with its ``NodeIndex``). ``memory``: what
rounds carry over (the policy's state, the round's rescale history). ``writer``: a round's decisions → one
transaction. ``launches``: telling the executor after the commit. ``round``: the round itself, which composes
them around ``scheduler.core.cycle.run_cycle`` — the same round the simulator runs.
"""
