"""The documented range of every number that enters the queue from outside (API, admin, commands).

One home, read by the models' validators (so admin and ``full_clean`` enforce them), the API's serializers and the
database's check constraints. Integers stay inside PostgreSQL's 32-bit ``integer`` columns; work, times and speeds
stay finite and physically plausible, so no input can overflow a sum, a JSON document or the simulator's clock.
"""

from __future__ import annotations

INT32_MAX = 2**31 - 1

# GPUs a job may ask for, and on how many nodes a report says it ran: far above any cluster, far below overflow.
# Whether a job fits *this* cluster is checked against the inventory (``inventory.check_fits_inventory``).
MAX_GPUS = 65_536
PRIORITY_RANGE = (-1_000_000, 1_000_000)
# A tenant's members may give their own jobs at most this priority unless an operator sets the tenant's own cap:
# priorities order jobs across tenants, so one tenant's 1,000,000 must not outrank everyone else's work.
DEFAULT_TENANT_MAX_PRIORITY = 100
MAX_BATCH_SIZE = 16_777_216  # 2²⁴ samples in one global batch
# Work in a profile's units (scale-invariant iterations or samples), or seconds at min_gpus for a job without one:
# 10¹² is 30,000 years of seconds — anything larger is a typo or an attack, never a job.
MAX_TOTAL_WORK = 1e12
MAX_THROUGHPUT = 1e9  # samples per second reported by one job (an H100 does ~10⁴ on ResNet-50)
MIN_STEP_SECONDS = 1e-6  # a reported optimiser step takes at least a microsecond ...
MAX_STEP_SECONDS = 7 * 86_400.0  # ... and at most a week
MAX_GRAD_NOISE_SCALE = 1e12
MAX_NAME_LENGTH = 200
MAX_COMMAND_LENGTH = 10_000
MAX_EXPECTED_SECONDS = 365 * 86_400.0  # a user's estimate of a job's run: at most a year
MAX_RESTART_SECONDS = 86_400.0  # a checkpoint-restart of at most a day
# The scheduler's settings: a round at least daily keeps every timer valid (beat's interval, a round's expiry and
# lease, the forecast's freshness); a simulated clock at most 10⁴ times the wall keeps simulated seconds finite.
MAX_ROUND_SECONDS = 86_400
SIMULATED_SPEEDUP_RANGE = (0.001, 10_000.0)
