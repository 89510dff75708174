"""Job queue and GPU inventory: Django adapters around the pure ``scheduler.core``."""
