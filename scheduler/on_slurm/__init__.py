"""The console on a Slurm cluster, above the Slurm back-end: setting the console up from what Slurm has
(``setup``: ``make run`` with ``CLUSTER_BACKEND=slurm``) and measuring its start estimates beside Slurm's own
(``backtest``: ``manage.py slurm_forecast_backtest``)."""
