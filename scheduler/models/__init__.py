"""The scheduler's models, one module per concern; everything is importable from here.

``queue``: tenants, inventory, jobs and allocations. ``audit``: rounds and rescale events.
``whatif``: what-if runs and sweeps. ``live``: the live scheduler's settings and state. ``forecast``: forecasts
of the queue and the runtime models behind them.
"""

from .audit import RescaleEvent, RescaleKind, RoundStatus, SchedulingRound
from .forecast import Forecast, JobForecast, RuntimeModel
from .live import (
    ClusterFairness,
    DemoFeed,
    ExecutorKind,
    JobReport,
    Lease,
    PolicyState,
    RoundMemory,
    SchedulerSettings,
    SettingsChange,
)
from .queue import (
    ACTIVE_STATES,
    FINISHED_STATES,
    JOB_TRANSITIONS,
    QUEUED_STATES,
    SCHEDULABLE_STATES,
    Allocation,
    ClusterLogin,
    Gpu,
    GpuHealth,
    Job,
    JobQuerySet,
    JobState,
    Node,
    Tenant,
    TenantQuerySet,
    cluster_login,
    new_report_token,
)
from .whatif import WHATIF_FINISHED, WhatIfRun, WhatIfStatus, WhatIfSweep

__all__ = [
    "ACTIVE_STATES", "FINISHED_STATES", "JOB_TRANSITIONS", "QUEUED_STATES", "SCHEDULABLE_STATES", "WHATIF_FINISHED",
    "Allocation", "ClusterFairness", "ClusterLogin", "DemoFeed", "ExecutorKind", "Forecast", "Gpu", "GpuHealth",
    "Job", "JobForecast", "JobQuerySet", "JobReport", "JobState", "Lease", "Node", "PolicyState", "RescaleEvent",
    "RescaleKind", "RoundMemory", "RoundStatus", "RuntimeModel", "SchedulerSettings", "SchedulingRound",
    "SettingsChange", "Tenant", "TenantQuerySet", "WhatIfRun", "WhatIfStatus", "WhatIfSweep", "cluster_login",
    "new_report_token",
]
