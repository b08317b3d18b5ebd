"""ensembled for the notebook: read a run's state directory, plot it, predict with its
ensemble, talk to `ensembled serve`, and write mutation commands (docs/python.md).

    import ensembled
    run = ensembled.open_run("run/demo")            # Run (run.py)
    run.table()                                     # the per-round summary (round_table.py)
    m = run.round(-1).member("m000")                # Member (member.py): metrics, history,
    m.holdout_pred, m.weights                       #   predictions, weights as numpy arrays
    ensembled.plots.learning_curves(m)              # matplotlib, optional (plots.py)
    run.predict(rows)                               # through ensemblectl (predictor.py)
    ensembled.load_exported("ensemble.pt")(rows)    # an exported module, with torch (exported.py)
    ensembled.Daemon(socket).submit("exp.json")     # the serve daemon (daemon.py)
    ensembled.mutation.run(select)                  # a mutation command (mutation.py)

Names are imported when first used, so `import ensembled.member_files` (what
examples/member_files.py re-exports) needs neither numpy nor anything else beyond the
standard library.
"""
import importlib

__version__ = "0.1.0"

_NAMES = {
    "open_run": "run", "Run": "run", "Round": "round", "Member": "member", "Table": "table",
    "predict": "predictor", "Predictor": "predictor", "find_ensemblectl": "predictor",
    "export": "exported", "load_exported": "exported", "ExportedModule": "exported",
    "Daemon": "daemon", "read_journal": "journal", "read_segment": "dataset_segment",
    "EnsembledError": "errors", "Refused": "errors", "DaemonUnreachable": "errors", "PredictError": "errors",
    "NotCommitted": "errors", "CorruptState": "errors", "MutationOutputError": "errors",
}
_MODULES = ("calibration", "control_socket", "daemon", "dataset_segment", "errors", "exported", "journal", "member",
            "member_files", "member_weights", "mutation", "plots", "predictor", "round", "round_table", "run", "table")

__all__ = sorted(_NAMES) + ["mutation", "plots"]


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module("." + _NAMES[name], __name__), name)
    if name in _MODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'ensembled' has no attribute %r" % name)


def __dir__():
    return sorted(set(globals()) | set(_NAMES) | set(_MODULES))
