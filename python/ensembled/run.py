"""Run: a run's state directory opened for reading (ARCHITECTURE.md "Run-state layout").

    run = ensembled.open_run("run/demo")
    run.info                  run.json: run_id, feature_names, holdout_rows, classes, ...
    run.config                the config the run uses (config.json's "config")
    run.rounds                its committed rounds (Round), from journal.jsonl
    run.round(1)              one of them; a round not committed is NotCommitted
    run.table()               the per-round summary table (`ensemblectl status`'s)
    run.holdout(), run.pool(), run.train()    the data tables (dataset_segment.py)
    run.predict(x)            the ensemble on new rows, through `ensemblectl predict`

The journal is read when the run is opened and again by refresh(); a run still training can
be read (what it has committed so far). Only reads: never takes the supervisor's lock, never
writes. A directory without run.json is FileNotFoundError naming it. Not thread-safe.
"""
import json
import os

from .dataset_segment import read_segment
from .errors import NotCommitted
from .journal import read_journal, replay
from .round import Round
from .round_table import round_table, round_table_text


def open_run(state_dir):
    return Run(state_dir)


class Run:
    def __init__(self, state_dir):
        self.state_dir = os.path.abspath(os.fspath(state_dir))
        path = os.path.join(self.state_dir, "run.json")
        if not os.path.exists(path):
            raise FileNotFoundError("%s: no run.json (no run in %s?)" % (path, self.state_dir))
        with open(path) as f:
            self.info = json.load(f)
        self.refresh()

    def refresh(self):
        """Reads the journal again (a run still training has committed more since)."""
        self.progress = replay(read_journal(os.path.join(self.state_dir, "journal.jsonl")))
        self._rounds = [Round(self, c, files) for c, files in zip(self.progress.committed, self.progress.round_files)]
        return self

    def __repr__(self):
        return "Run(%r, %d rounds committed%s)" % (self.name, len(self._rounds),
                                                   ", finished" if self.finished else "")

    @property
    def name(self):
        return self.info.get("run_name", "")

    @property
    def feature_names(self):
        return list(self.info.get("feature_names", []))

    @property
    def classes(self):
        """A classifier's class labels (class index i is classes[i]); None for a regression."""
        return self.info.get("classes")

    @property
    def config(self):
        with open(os.path.join(self.state_dir, "config.json")) as f:
            return json.load(f).get("config", {})

    @property
    def finished(self):
        return self.progress.finished

    @property
    def finish_reason(self):
        return self.progress.finish_reason

    @property
    def rounds(self):
        return list(self._rounds)

    def round(self, number=-1):
        """Committed round `number`; -1 (the default): the last committed."""
        if not self._rounds:
            raise NotCommitted("run %s has no committed round yet" % self.name)
        if number == -1:
            return self._rounds[-1]
        if not 0 <= number < len(self._rounds):
            raise NotCommitted("round %d is not committed (last: %d)" % (number, len(self._rounds) - 1))
        return self._rounds[number]

    def table(self):
        return round_table(self.progress.committed)

    def table_text(self):
        """The round table as `ensemblectl status` prints it."""
        return round_table_text(self.progress.committed)

    def _segment(self, name):
        return read_segment(os.path.join(self.state_dir, "data", name + ".bin"))

    def holdout(self):
        """The fixed holdout every round is scored on: .x [rows, features], .y its targets."""
        return self._segment("holdout")

    def pool(self):
        """The candidate rows mutations take from (the pool's own labels in .y)."""
        return self._segment("pool")

    def train(self):
        """The training table as it stands now, every generation's rows (drops included: a
        round's rows are in its mutation view and its excluded file)."""
        return self._segment("train")

    def predict(self, x, round=-1, raw_sigma=False, ensemblectl=None):
        """The ensemble of round `round` (default: the last committed) on rows `x` (an array
        [rows, features] in feature_names order, or columns by name): a Table of
        `ensemblectl predict`'s columns (predictor.py)."""
        from .predictor import predict
        return predict(self.state_dir, x, round=round, raw_sigma=raw_sigma, ensemblectl=ensemblectl,
                       feature_names=self.feature_names)
