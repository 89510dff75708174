"""Research reproductions and benchmarks: the product measured against its authors' published results and timed.

An app of its own beside the product's (``cluster_ops``, ``scheduler``, ``telemetry``): it imports them, and nothing
in them imports it (an import-linter contract), so the console runs the same without it. Its commands:
``validate_pollux`` and ``validate_sia`` (the simulator against the Pollux and Sia authors' simulators),
``bench_policies``, ``bench_round``, ``bench_forecast`` and ``bench_telemetry`` (what ``make bench`` runs).
"""
