"""Scoring runs: the paper's metrics per model and arm, guided minus unguided with paired bootstrap intervals.

Start at :func:`score_runs` (runs loaded with :func:`load_run_dir` or :func:`load_files`); the definitions are
in :mod:`d2kgrade.metrics.perf` (speed, Performance Score), :mod:`d2kgrade.metrics.design` (proposed and
implemented rates) and ``docs/metrics.md``.
"""

from d2kgrade.metrics.perf import ScoreConfig
from d2kgrade.metrics.results import NothingToScore, ScoreResult, StatusCount, metric_registry
from d2kgrade.metrics.score import score_runs, score_tables
from d2kgrade.metrics.tables import RunTables, combine, load_files, load_run_dir

__all__ = ["NothingToScore", "RunTables", "ScoreConfig", "ScoreResult", "StatusCount", "combine", "load_files", "load_run_dir", "metric_registry",
           "score_runs", "score_tables"]
