"""``manage.py backtest_forecast``: how far the forecasts are from what happened, beside two baselines."""

import dataclasses
import json
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from scheduler.core.policy import UnknownPolicy
from scheduler.sim.backtest import BacktestResult, Errors
from scheduler.sim.runner import backtest_scenario
from scheduler.sim.traces import TraceError

from .simulate import Command as SimulateCommand

ROWS = (("forecast", None), ("queue position × mean duration", "queue_position"),
        ("requested time (2 × true), Slurm-style plan", "requested_time"))


class Command(SimulateCommand):
    help = ("Replay a trace, forecast every simulated hour from the simulated state (the predictor trained only "
            "on jobs finished by then) and print the start and finish errors beside two baselines.")

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.set_defaults(policy="tiresias")
        parser.add_argument("--every", type=float, default=3600.0, help="simulated seconds between forecasts")
        parser.add_argument("--measured-profiles", action="store_true",
                            help="jobs run as the Pollux artifact measured them (gradient curves, step times) while "
                                 "the forecasts know only the fitted models: the score includes their error")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 60 <= options["every"] <= 30 * 86_400:
            raise CommandError("--every: expected seconds between 60 and 2,592,000")
        try:
            scenario = dataclasses.replace(self._scenario(options), measured_profiles=options["measured_profiles"])
            result = backtest_scenario(scenario, settings.TRACES_DIR, options["every"])
        except (TraceError, UnknownPolicy, ValueError, FileNotFoundError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(json.dumps(result.as_dict()) if options["json"] else _table(result))


def _table(result: BacktestResult) -> str:
    lines = [f"policy {result.policy}: {result.forecasts} forecasts, wall per forecast median "
             f"{_seconds(result.forecast_wall_s['median'], 3)} s, max {_seconds(result.forecast_wall_s['max'], 3)} s",
             f"{'':46s} {'n':>7s} {'median |err|':>12s} {'p90 |err|':>10s} {'±10 min':>8s} {'±25 %':>6s}"]
    for label, key in ROWS:
        errors = {"start": result.start, "finish": result.finish} if key is None else result.baselines[key]
        for kind in ("start", "finish"):
            lines.append(f"{label + ', ' + kind:46s} {_row(errors[kind])}")
    return "\n".join(lines)


def _row(errors: Errors) -> str:
    median, p90 = _seconds(errors.median_abs_error_s), _seconds(errors.p90_abs_error_s)
    return (f"{errors.count:>7d} {median:>10s} s {p90:>8s} s "
            f"{_share(errors.within_10min):>8s} {_share(errors.within_25pct):>6s}")


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def _seconds(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"
