"""A round's reliability: does the ensemble's uncertainty mean what it says?
(docs/active-learning.md "The reliability plot"; orchestrator/run/ensemble_summary.h)

reliability(round) ->
- IntervalReliability for a regression (plain with 2+ members, several targets, Gaussian
  heads): from the round's summary, for each nominal level p (5 %, 10 %, ..., 95 %) the
  fraction of holdout rows inside the central interval a Gaussian with the ensemble's mean and
  sigma gives p of its mass, with the raw sigma (`raw`) and the calibrated one (`calibrated`,
  cross-fitted); ice / calibrated_ice their mean distance from the diagonal.
- ConfidenceReliability for a classifier: computed here from the members' holdout
  probabilities and the holdout labels as ensembled computes ensemble_ece (the mean of the
  members' probabilities summed in member order in double; confidence = the highest mean
  probability, right = its class (ties: the first) is the label; 15 equal-width bins
  (b/15, (b+1)/15], 0 in the first): per bin its rows, mean confidence and accuracy (NaN when
  empty), and ece, which equals the summary's ensemble_ece.
A one-member regression has no spread to judge: EnsembledError. Pure but for reading the
round's files.
"""
import math

import numpy as np

from .errors import EnsembledError

BINS = 15


class IntervalReliability:
    kind = "intervals"

    def __init__(self, nominal, raw, calibrated, ice, calibrated_ice):
        self.nominal, self.raw, self.calibrated = nominal, raw, calibrated
        self.ice, self.calibrated_ice = ice, calibrated_ice


class ConfidenceReliability:
    kind = "confidence"

    def __init__(self, edges, count, confidence, accuracy, ece):
        self.edges, self.count, self.confidence, self.accuracy, self.ece = edges, count, confidence, accuracy, ece


def reliability(round_):
    e = round_.ensemble
    if "ensemble_accuracy" in e:
        labels = round_.run.holdout().y.astype(np.int64)
        return confidence_reliability(round_.holdout_predictions(), labels)
    curve = e.get("reliability")
    if not isinstance(curve, dict):
        raise EnsembledError("round %d has no reliability curve (a regression needs at least 2 members "
                             "to have a spread to judge)" % round_.number)
    return IntervalReliability(np.array(curve["nominal"]), np.array(curve["raw"]), np.array(curve["calibrated"]),
                               e.get("interval_calibration_error", math.nan),
                               e.get("calibrated_interval_calibration_error", math.nan))


def confidence_reliability(member_probabilities, labels):
    """member_probabilities: [members, rows, classes]; labels: [rows] class indices."""
    mean = np.zeros(member_probabilities.shape[1:], dtype=np.float64)
    for p in member_probabilities:
        mean += p
    mean /= len(member_probabilities)
    top = mean.max(axis=1)
    right = mean.argmax(axis=1) == labels
    bins = np.clip(np.ceil(top * BINS).astype(np.int64) - 1, 0, BINS - 1)
    count = np.bincount(bins, minlength=BINS).astype(np.float64)
    confidence_sum = np.zeros(BINS)
    right_sum = np.zeros(BINS)
    for b, t, r in zip(bins, top, right):  # row order, as ensembled sums them
        confidence_sum[b] += t
        right_sum[b] += r
    ece = 0.0
    for b in range(BINS):
        if count[b] > 0:
            ece += abs(right_sum[b] - confidence_sum[b])
    with np.errstate(invalid="ignore", divide="ignore"):
        return ConfidenceReliability(np.linspace(0, 1, BINS + 1), count, confidence_sum / count, right_sum / count,
                                     ece / len(labels) if len(labels) else 0.0)
