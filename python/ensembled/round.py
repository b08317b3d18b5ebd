"""Round: one committed round of a run, rounds/rNNNN/ and its journal record.

    r = run.round(1)
    r.record          the journal's round_committed record (trained_rows, generation, pool_used, ...)
    r.ensemble        its summary of the ensemble (orchestrator/run/ensemble_summary.h: RMSE or
                      accuracy, disagreement, calibration, the reliability curve)
    r.summary         rounds/rNNNN/summary.json (the ensemble, each member's metrics, the mutation)
    r.member_names, r.member("m000"), r.members
    r.member_table()  a Table of the members' metrics (one row a member)
    r.holdout_predictions()   [members, rows(, width)] in member_names order
    r.reliability()   calibration.py
    r.files           what retention left: "all", "train_state" or "records"

Reads its files when asked; not thread-safe.
"""
import json
import os

import numpy as np

from .calibration import reliability
from .member import Member
from .table import Table


class Round:
    def __init__(self, run, record, files):
        self.run, self.record, self.files = run, record, files
        self.number = int(record["round"])
        self.dir = os.path.join(run.state_dir, "rounds", "r%04d" % self.number)
        self._members = None
        self._summary = None

    def __repr__(self):
        return "Round(%d of %s, %d members)" % (self.number, self.run.name, len(self.member_names))

    @property
    def ensemble(self):
        return self.record.get("summary") or {}

    @property
    def summary(self):
        if self._summary is None:
            with open(os.path.join(self.dir, "summary.json")) as f:
                self._summary = json.load(f)
        return self._summary

    @property
    def trained_rows(self):
        return int(self.record.get("trained_rows", 0))

    @property
    def member_names(self):
        return [m.name for m in self.members]

    @property
    def members(self):
        if self._members is None:
            from .member_files import round_members
            info = self.run.info
            self._members = [Member(self.dir, n, self.number, int(info.get("holdout_rows", 0)), int(info.get("pool_rows", 0)))
                             for n in round_members(self.dir)]
        return self._members

    def member(self, name):
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError("round %d has no member %r (it has %s)" % (self.number, name, ", ".join(self.member_names)))

    def member_table(self):
        """The members' metrics, a row a member: the keys of metrics.json every member has."""
        metrics = [m.metrics for m in self.members]
        columns = ["member"] + [k for k in (metrics[0] if metrics else {})
                                if k != "member" and all(k in x for x in metrics) and not isinstance(metrics[0][k], (dict, list))]
        return Table(columns, {c: [m.name for m in self.members] if c == "member" else [x[c] for x in metrics]
                               for c in columns})

    def holdout_predictions(self):
        return np.stack([m.holdout_pred for m in self.members])

    def pool_predictions(self):
        return np.stack([m.pool_pred for m in self.members])

    def reliability(self):
        return reliability(self)
