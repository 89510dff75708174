"""Shared infrastructure the apps import downward, and which imports no app: sending work after commit
(``dispatch``), heartbeats of long work (``liveness``), JSON bodies of bounded depth (``bounded_json``), the
benchmarks' throwaway database (``benchdb``) and the product's version (``version``)."""
