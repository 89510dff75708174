"""Django admin for operators: the queue, the inventory, the audit trail and what-if runs.

Importing the package registers every page (Django's admin autodiscovery imports it).
"""

from . import audit, forecasts, inventory, jobs, logins, scheduling, whatif  # noqa: F401
