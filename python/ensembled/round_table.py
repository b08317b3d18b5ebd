"""The per-round summary table: what `ensemblectl status` prints for a run's committed rounds
(ctl/status_command.cpp PrintRounds), from the journal's round_committed records.

round_table(committed) -> Table with, per committed round: round, train_rows (the rows it
trained on), metric ("rmse", or "accuracy" for a classifier), member_mean and member_std (the
members' holdout RMSE or accuracy), ensemble (the ensemble's), ensemble_error (what
rounds.stop_below_error compares), each figure of FIGURES (NaN where the round's summary has
none) and wall_seconds. round_table_text(committed) -> the lines `ensemblectl status` prints
for them, character for character.

FIGURES mirrors kRoundFigures of orchestrator/service/round_figures.h (the one list in C++):
(name, its regression summary key, its classification summary key, its column header in
`ensemblectl status`); python/tests checks the text against ensemblectl's, so a figure added
there and not here shows up. Pure.
"""
import math

from .table import Table

FIGURES = (
    ("coverage_1sigma", "coverage_1sigma", "", "cover 1sd"),
    ("coverage_2sigma", "coverage_2sigma", "", "cover 2sd"),
    ("holdout_nll", "ensemble_gaussian_nll", "ensemble_nll", "NLL"),
    ("ece", "", "ensemble_ece", "ECE"),
    ("calibrated_coverage_1sigma", "calibrated_coverage_1sigma", "", "cal. 1sd"),
    ("calibrated_coverage_2sigma", "calibrated_coverage_2sigma", "", "cal. 2sd"),
    ("calibrated_nll", "calibrated_gaussian_nll", "calibrated_nll", "cal. NLL"),
    ("calibrated_ece", "", "calibrated_ece", "cal. ECE"),
    ("ice", "interval_calibration_error", "", ""),
    ("calibrated_ice", "calibrated_interval_calibration_error", "", ""),
)


def is_classification(summary):
    return isinstance(summary, dict) and "ensemble_accuracy" in summary


def _number(summary, key, default):
    v = summary.get(key, default) if isinstance(summary, dict) else default
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def round_view(record):
    """One row of the table from a round_committed record (RoundView::FromSummary)."""
    e = record.get("summary") or {}
    classify = is_classification(e)
    error = _number(e, "ensemble_error", _number(e, "ensemble_rmse", math.inf))
    row = {"round": int(record.get("round", 0)), "train_rows": int(record.get("trained_rows", 0)),
           "metric": "accuracy" if classify else "rmse"}
    prefix = "accuracy" if classify else "rmse"
    row["member_mean"] = _number(e, "member_%s_mean" % prefix, 0.0)
    row["member_std"] = _number(e, "member_%s_std" % prefix, 0.0)
    row["ensemble"] = _number(e, "ensemble_%s" % prefix, 0.0)
    row["ensemble_error"] = error
    for name, regression_key, classification_key, _ in FIGURES:
        key = classification_key if classify else regression_key
        row[name] = _number(e, key, math.nan) if key else math.nan
    row["wall_seconds"] = _number(record, "wall_seconds", 0.0)
    return row


def round_table(committed):
    rows = [round_view(c) for c in committed]
    columns = ["round", "train_rows", "metric", "member_mean", "member_std", "ensemble", "ensemble_error"]
    columns += [f[0] for f in FIGURES] + ["wall_seconds"]
    return Table(columns, {c: [r[c] for r in rows] for c in columns})


def round_table_text(committed):
    classify = bool(committed) and is_classification(committed[-1].get("summary"))
    metric = "accuracy" if classify else "RMSE"
    shown = [f for f in FIGURES if f[3] and (f[2] if classify else f[1])]
    lines = ["%-6s %12s %28s %18s" % ("round", "train rows", "member holdout %s (mean±std)" % metric,
                                      "ensemble %s" % metric) + "".join(" %10s" % f[3] for f in shown)]
    for c in committed:
        r = round_view(c)
        line = "%-6d %12d %19.4f ± %-7.4f %18.4f" % (r["round"], r["train_rows"], r["member_mean"], r["member_std"],
                                                     r["ensemble"])
        line += "".join(" %10s" % ("-" if math.isnan(r[f[0]]) else "%.4f" % r[f[0]]) for f in shown)
        lines.append(line)
    return "\n".join(lines) + "\n"
