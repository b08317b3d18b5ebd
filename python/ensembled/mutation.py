"""A mutation command ("mutation": {"policy": "command", "argv": [...]}) in a few lines
(docs/active-learning.md "Mutation commands"; orchestrator/run/mutation_policy.cpp).

The contract: after each round but the last, ensembled runs the program (no shell) with the
round's summary as one JSON object on stdin ("round", "generation", "train_rows",
"wall_seconds", "ensemble": its scores, "run": where everything is: mutation_view.h) and the
ENSEMBLED_* variables; the program exits 0 within mutation.timeout_s having printed one JSON
object, {"add": [[features..., target(s) or class label], ...], "drop": [table row ids],
"take": [pool row ids]}, each key optional. Its stderr goes to the daemon's log.

    import numpy as np
    from ensembled import mutation

    def most_disputed(r):                            # r: MutationRound
        spread = r.pool_predictions().std(axis=0)    # [members, pool rows] -> per pool row
        free = r.pool_unused_ids
        return {"take": free[np.argsort(-spread[free], kind="stable")[:10]]}

    mutation.run(most_disputed)

run(select) reads stdin, calls select(MutationRound) with print() sent to stderr (stdout is
the answer's), checks and writes what select returned (a dict with add/drop/take, numpy
arrays welcome; `add` may also be a pair (x, y); None adds nothing), and returns it.
A decision the policy would refuse for its shape (an unknown key, a row of the wrong width,
a value not a finite float32, a negative id) is MutationOutputError before anything is
printed, in the daemon's words; which ids are valid is the daemon's to check. Not thread-safe.
"""
import contextlib
import json
import math
import sys

import numpy as np

from .errors import MutationOutputError
from .predictor import Predictor

KEYS = ("add", "drop", "take")
FLOAT32_MAX = float(np.finfo(np.float32).max)


class MutationRound:
    """What a mutation command is told of the round: `summary` (stdin's object), `view` (its
    "run" object), and the arrays they point at, read when first asked."""

    def __init__(self, summary):
        self.summary, self.view = summary, summary["run"]
        self._cache = {}

    round = property(lambda self: int(self.view["round"]))
    generation = property(lambda self: int(self.view["generation"]))
    state_dir = property(lambda self: self.view["state_dir"])
    round_dir = property(lambda self: self.view["round_dir"])
    features = property(lambda self: int(self.view["features"]))
    feature_names = property(lambda self: list(self.view["feature_names"]))
    targets = property(lambda self: int(self.view.get("targets", 1)))
    classes = property(lambda self: self.view.get("classes"), doc="a classifier's labels; None for a regression")
    ensemble = property(lambda self: self.summary.get("ensemble", {}), doc="the round's ensemble scores")
    member_names = property(lambda self: [m["name"] for m in self.view["members"]])

    def _once(self, key, load):
        if key not in self._cache:
            self._cache[key] = load()
        return self._cache[key]

    @property
    def train_table(self):
        """The training table's rows of the round's generation: [rows, features + targets]."""
        t = self.view["train_table"]
        return self._once("train_table", lambda: np.fromfile(t["path"], t.get("dtype", "<f4"), count=t["rows"] * t["columns"],
                                                             offset=t["header_bytes"]).reshape(t["rows"], t["columns"]))

    train_row_ids = property(lambda self: self._once("train_row_ids", lambda: np.load(self.view["train_row_ids"])),
                             doc="int64: the table rows the round trained on, oldest first")
    pool_unused_ids = property(lambda self: self._once("pool_unused_ids", lambda: np.load(self.view["pool_unused_ids"])),
                               doc="int64: the pool rows no mutation has taken yet")
    holdout_x = property(lambda self: self._once("holdout_x", lambda: np.load(self.view["holdout_x"])))
    pool_x = property(lambda self: self._once("pool_x", lambda: np.load(self.view["pool_x"])))

    @property
    def train_x(self):
        return self.train_table[self.train_row_ids, :self.features]

    @property
    def train_y(self):
        y = self.train_table[self.train_row_ids, self.features:]
        return y[:, 0] if y.shape[1] == 1 else y

    def _predictions(self, which, rows):
        out = []
        for m in self.view["members"]:
            v = np.fromfile(m[which + "_file"], self.view.get("predictions_dtype", "<f4"), count=m[which + "_count"],
                            offset=m[which + "_offset"])
            width = v.size // rows if rows else 1
            out.append(v if width == 1 else v.reshape(rows, width))
        return np.stack(out)

    def holdout_predictions(self):
        """[members, holdout rows(, width)] in member_names order (width: classes, targets, or
        [mean, variance] for Gaussian heads)."""
        return self._predictions("holdout_pred", len(self.holdout_x))

    def pool_predictions(self):
        return self._predictions("pool_pred", len(self.pool_x))

    def predictor(self, raw_sigma=False):
        """This round's ensemble on rows of your own (`ensemblectl predict --round R`: the round
        being committed); close it, or use it in a with block."""
        return Predictor(self.state_dir, round=self.round, raw_sigma=raw_sigma, ensemblectl=self.view.get("ensemblectl"),
                         feature_names=self.feature_names)


def _label(v, where):
    if isinstance(v, (str, np.str_)):
        return str(v)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    raise MutationOutputError("%s: a class label must be a string or an integer" % where)


def _number(v, where):
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = math.nan
    if not math.isfinite(f) or abs(f) > FLOAT32_MAX:
        raise MutationOutputError("%s: not a finite float32 number" % where)
    return f


def _rows(add, r):
    if isinstance(add, tuple) and len(add) == 2:  # (x, y)
        x = np.asarray(add[0])
        y = add[1] if r.classes else np.asarray(add[1], dtype=np.float64)
        return [list(xi) + (list(yi) if np.ndim(yi) else [yi]) for xi, yi in zip(x.reshape(len(x), -1), y)]
    return [list(row) for row in (add.tolist() if isinstance(add, np.ndarray) else add)]


def normalise(decision, r):
    """The decision as the JSON object the policy reads (MutationOutputError when it cannot be)."""
    if decision is None:
        return {}
    out = {}
    for key in decision:
        if key not in KEYS:
            raise MutationOutputError("/%s: unknown key" % key)
    if "add" in decision:
        width = r.features + (1 if r.classes else r.targets)
        rows = []
        for i, row in enumerate(_rows(decision["add"], r)):
            where = "/add/%d" % i
            if len(row) != width:
                what = ("values (feature numbers then a class label)" if r.classes else
                        "numbers (features then %d targets)" % r.targets if r.targets > 1 else "numbers (features then target)")
                raise MutationOutputError("%s: must be an array of %d %s" % (where, width, what))
            values = [_number(v, "%s/%d" % (where, c)) for c, v in enumerate(row[:r.features if r.classes else width])]
            if r.classes:
                values.append(_label(row[r.features], "%s/%d" % (where, r.features)))
            rows.append(values)
        out["add"] = rows
    for key in ("drop", "take"):
        if key in decision:
            ids = []
            for i, v in enumerate(np.asarray(decision[key]).reshape(-1).tolist()):
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise MutationOutputError("/%s/%d: %r is not a row id" % (key, i, v))
                ids.append(v)
            out[key] = ids
    return out


def run(select, stdin=None, stdout=None):
    """The whole command: read the round, decide with `select`, print the decision."""
    summary = json.load(stdin or sys.stdin)
    r = MutationRound(summary)
    with contextlib.redirect_stdout(sys.stderr):
        decision = normalise(select(r), r)
    out = stdout or sys.stdout
    out.write(json.dumps(decision) + "\n")
    out.flush()
    return decision
