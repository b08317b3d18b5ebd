"""Predictions through an exported TorchScript module, for serving without ensembled
(README "The main commands": `ensemblectl export`). torch is needed to run one (imported
when a module is loaded); ensemblectl only to write it.

    path = export("run/demo", "ensemble.pt")              # ensemblectl export --state-dir ... -o
    m = load_exported("ensemble.pt")
    mean, std = m(x)                                      # numpy float32 arrays

export(state_dir, output, round=-1, raw_sigma=False, member=None, ensemblectl=None) writes
the round's ensemble (forward(x) -> (mean, std), calibrated unless raw_sigma; a classifier's
or Gaussian heads' outputs as docs/configuration.md lists them), or with `member` that
member's own module; it returns `output`. Its failure is PredictError with ensemblectl's
stderr ("ensemblectl export: ...") and exit status.

load_exported(path) -> ExportedModule: called on rows [rows, features] (the run's feature
order; raw values, the module standardises them) it returns what forward returns, each
tensor as a numpy array (one array, or a tuple). A row's numbers do not depend on its batch,
and equal `ensemblectl predict`'s bit for bit (docs/reproducibility.md). Not thread-safe.
"""
import os
import subprocess
import warnings

import numpy as np

from .errors import PredictError
from .predictor import find_ensemblectl


def export(state_dir, output, round=-1, raw_sigma=False, member=None, ensemblectl=None):
    argv = [find_ensemblectl(ensemblectl), "export", "--state-dir", os.fspath(state_dir), "-o", os.fspath(output)]
    if round is not None and round >= 0:
        argv += ["--round", str(round)]
    if raw_sigma:
        argv.append("--raw-sigma")
    if member:
        argv += ["--member", member]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise PredictError(r.stderr.strip() or "ensemblectl export exited with %d" % r.returncode, r.returncode)
    return os.fspath(output)


class ExportedModule:
    def __init__(self, path):
        try:
            import torch
        except ImportError as e:
            raise ImportError("an exported module runs with torch: pip install torch") from e
        self._torch = torch
        self.path = os.fspath(path)
        with warnings.catch_warnings():  # torch 2.11 deprecates TorchScript, the format export writes
            warnings.simplefilter("ignore", DeprecationWarning)
            self.module = torch.jit.load(self.path, map_location="cpu")
        self.module.eval()

    def __repr__(self):
        return "ExportedModule(%r)" % self.path

    def __call__(self, x):
        rows = np.ascontiguousarray(x, dtype=np.float32)
        if rows.ndim == 1:
            rows = rows.reshape(1, -1)
        with self._torch.no_grad():
            out = self.module(self._torch.from_numpy(rows))
        if isinstance(out, (tuple, list)):
            return tuple(t.numpy() for t in out)
        return out.numpy()


def load_exported(path):
    return ExportedModule(path)
