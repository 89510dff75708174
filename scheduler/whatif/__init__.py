"""What-if: replay a trace (or this cluster's history) under other settings, through the simulator, and compare.

One domain, one package. ``scheduler.sim.scenario.Scenario`` is what a what-if is and checks its own fields;
``traces`` confines the trace it names; ``runs`` stores, runs and compares runs and sweeps (the only writer of their
rows); ``history`` turns this cluster's own recent jobs and inventory into a (baseline, what-if) pair; ``views``
reads runs back as a viewer may see them, with the trade-off between two. The Energy page, admin, the REST API,
``manage.py simulate`` and the reports are its callers; the metric words come from ``scheduler.sim.catalogue``.
"""

from .runs import (
    FINISH_SWEEP_TASK,
    METRICS,
    PARAMETERS,
    RUN_TASK,
    ProgressWriter,
    build_comparison,
    cancel_run,
    caps_label,
    compare_sweep,
    create_run,
    create_sweep,
    create_sweep_of,
    execute_run,
    launch_run,
    launch_sweep,
    recover_runs,
    rerun,
    scenario_from_dict,
    sweep_scenarios,
    validate_scenario,
)

__all__ = [
    "FINISH_SWEEP_TASK", "METRICS", "PARAMETERS", "RUN_TASK", "ProgressWriter", "build_comparison",
    "cancel_run", "caps_label", "compare_sweep", "create_run", "create_sweep", "create_sweep_of", "execute_run",
    "launch_run", "launch_sweep", "recover_runs", "rerun", "scenario_from_dict", "sweep_scenarios", "validate_scenario",
]
