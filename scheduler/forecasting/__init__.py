"""Forecasts of the live queue: when each waiting job should start and finish (``forecasts``), and the runtime
predictor of jobs without a profile, retrained from the jobs that finished (``runtime_models``). What asks for a
forecast lives with the round (``live.forecast_requests``); the backtests are management commands."""
