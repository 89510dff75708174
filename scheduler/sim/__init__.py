"""The what-if simulator: pure Python like ``scheduler.core`` (no Django, no I/O but trace files)."""
