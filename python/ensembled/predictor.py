"""Predictions through `ensemblectl predict` (a subprocess; ensembled's own numbers, bit for
bit: every value it prints reads back to the same float32).

    t = predict("run/demo", x)                  # x: [rows, features] in the run's feature order
    t["mean"], t["std"]                         # float32 arrays (a Table of its columns)
    with Predictor("run/demo", round=3) as p:   # one process, the members loaded once,
        for batch in batches: p(batch)          # for any number of batches (--input -)

Columns are ensemblectl's, less "row": mean, std (one target; `--raw-sigma`: the members' own
spread); <target>_mean, <target>_std (several); class (labels, str), p_<label>...,
disagreement (a classifier); mean, aleatoric_std, epistemic_std, total_std (Gaussian heads).
`x` is an array, or a mapping or DataFrame whose columns are taken by the run's feature names.
Values go to ensemblectl as text that reads back to their float32 (%.9g). ensemblectl is
`ensemblectl` (a path), else $ENSEMBLED_CTL (a mutation command has it), else the one on
PATH; none: EnsembledError. Its failures are PredictError with its stderr ("ensemblectl
predict: round 5 is not committed (last: 1)") and its exit status. A Predictor is one child
process; not thread-safe.
"""
import os
import shutil
import subprocess
import tempfile

import numpy as np

from .errors import EnsembledError, PredictError
from .table import Table


def find_ensemblectl(ensemblectl=None):
    if ensemblectl:
        if not os.access(ensemblectl, os.X_OK):
            raise EnsembledError("%s: not an executable ensemblectl" % ensemblectl)
        return ensemblectl
    found = os.environ.get("ENSEMBLED_CTL") or shutil.which("ensemblectl")
    if not found:
        raise EnsembledError("ensemblectl is not on PATH (and ENSEMBLED_CTL is not set): "
                             "pass ensemblectl=\"/path/to/ensemblectl\"")
    return found


def _feature_names(state_dir):
    import json
    with open(os.path.join(state_dir, "run.json")) as f:
        return list(json.load(f).get("feature_names", []))


def _matrix(x, names):
    """x as float32 [rows, features] in the order of `names`."""
    if hasattr(x, "keys"):  # a mapping or a DataFrame: its columns by name
        missing = [n for n in names if n not in x.keys()]
        if missing:
            raise ValueError("the rows have no column %s (the run's features: %s)" % (missing[0], ", ".join(names)))
        return np.column_stack([np.asarray(x[n], dtype=np.float32) for n in names])
    m = np.asarray(x, dtype=np.float32)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    if m.ndim != 2 or m.shape[1] != len(names):
        raise ValueError("rows of %d features expected (%s), got shape %s" % (len(names), ", ".join(names), m.shape))
    return m


class Predictor:
    """`ensemblectl predict --input -` kept open: call it on batches of rows."""

    def __init__(self, state_dir, round=-1, raw_sigma=False, ensemblectl=None, feature_names=None):
        self.state_dir = os.fspath(state_dir)
        self.feature_names = feature_names or _feature_names(self.state_dir)
        argv = [find_ensemblectl(ensemblectl), "predict", "--state-dir", self.state_dir, "--input", "-"]
        if round is not None and round >= 0:
            argv += ["--round", str(round)]
        if raw_sigma:
            argv.append("--raw-sigma")
        self._stderr = tempfile.TemporaryFile()
        self._result = None
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, bufsize=1)
        self._send(",".join(self.feature_names) + "\n")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:
            self._finish()

    def _finish(self):
        """Ends the child (EOF on its stdin) once: (exit status, stderr text)."""
        if self._result is None:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
            code = self._proc.wait()
            self._proc.stdout.close()
            self._stderr.seek(0)
            self._result = code, self._stderr.read().decode(errors="replace").strip()
            self._stderr.close()
        return self._result

    def _failed(self):
        code, text = self._finish()
        return PredictError(text or "ensemblectl predict exited with %d" % code, code)

    def _send(self, text):
        if self._result is not None:
            raise EnsembledError("this Predictor is closed")
        try:
            self._proc.stdin.write(text)
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise self._failed() from None

    def __call__(self, x):
        rows = _matrix(x, self.feature_names)
        if len(rows) == 0:
            raise ValueError("no rows to predict")
        self._send("".join(",".join("%.9g" % v for v in r) + "\n" for r in rows.tolist()) + "\n")
        header = self._proc.stdout.readline()
        if not header:
            raise self._failed()
        columns = header.rstrip("\n").split(",")
        lines = [self._proc.stdout.readline().rstrip("\n").split(",") for _ in range(len(rows))]
        if self._proc.stdout.readline() != "\n" or any(len(v) != len(columns) for v in lines):
            raise self._failed()
        data = {}
        for i, c in enumerate(columns):
            values = [v[i] for v in lines]
            data[c] = np.array(values) if c == "class" else np.array(values, dtype=np.float32)
        return Table([c for c in columns if c != "row"], data)

    def close(self):
        """Ends the child; PredictError if it exited non-zero."""
        code, text = self._finish()
        if code != 0:
            raise PredictError(text or "ensemblectl predict exited with %d" % code, code)


def predict(state_dir, x, round=-1, raw_sigma=False, ensemblectl=None, feature_names=None):
    """One batch: a Predictor opened, called once, closed."""
    with Predictor(state_dir, round=round, raw_sigma=raw_sigma, ensemblectl=ensemblectl,
                   feature_names=feature_names) as p:
        return p(x)
