"""Member: one trained member of a committed round, its files as Python values, whichever
results_layout wrote them (member_files.py).

    m = run.round(1).member("m000")
    m.metrics["holdout_rmse"]; m.record["spec"]["layers"]      member.json, metrics.json
    m.history["val_loss"]                                      per epoch, numpy arrays
    m.holdout_pred, m.pool_pred                                float32 arrays
    m.weights["layer0_weight"]                                 weights.bin (an MLP member)

Predictions are a value per row ([rows]), or [rows, width]: a probability per class
(classification), a value per target (several targets), [mean, variance] (Gaussian heads);
the width is the file's values over the table's rows (run.json's holdout_rows, pool_rows).
A file retention removed (or a member never wrote) is FileNotFoundError naming its member
directory path. Reads its files when asked, each once (a published member's files do not
change); not thread-safe.
"""
import json
import os

import numpy as np

from . import member_files
from .errors import EnsembledError
from .member_weights import looks_like_member_weights, parse_member_weights


class Member:
    def __init__(self, round_dir, name, round_number, holdout_rows, pool_rows):
        self.round_dir, self.name, self.round = round_dir, name, round_number
        self._rows = {"holdout_pred.f32": holdout_rows, "pool_pred.f32": pool_rows}
        self._cache = {}

    def __repr__(self):
        return "Member(%r, round %d%s)" % (self.name, self.round, ", packed" if self.pack else "")

    @property
    def dir(self):
        """Its member directory's path (that directory exists only for a member not packed)."""
        return os.path.join(self.round_dir, "members", self.name)

    @property
    def pack(self):
        """The pack directory holding its files, or None (it has its own directory)."""
        packed = self._packed()
        return packed[0] if packed else None

    def _packed(self):
        if "packed" not in self._cache:
            self._cache["packed"] = member_files.member_pack(self.round_dir, self.name)
        return self._cache["packed"]

    def file_bytes(self, name):
        """A member file's bytes, as its own directory would hold them."""
        if name in member_files.RECORD_KEYS and self._packed():
            return (json.dumps(self._json(name), indent=2, ensure_ascii=False) + "\n").encode()
        return member_files.read_span(*member_files.member_span(self.round_dir, self.name, name, self._packed()))

    def _json(self, name):
        if name not in self._cache:
            packed = self._packed()
            if packed:
                self._cache[name] = packed[1][member_files.RECORD_KEYS[name]]
            else:
                with open(os.path.join(self.dir, name)) as f:
                    self._cache[name] = json.load(f)
        return self._cache[name]

    @property
    def record(self):
        """member.json: spec, seed, generation, rows, normalisation, the task it was trained from."""
        return self._json("member.json")

    @property
    def metrics(self):
        """metrics.json: holdout scores, epochs, timings, memory."""
        return self._json("metrics.json")

    @property
    def history(self):
        """history.jsonl as {key: array over epochs} (loss, val_loss, ...; NaN where an epoch lacks one)."""
        if "history" not in self._cache:
            epochs = [json.loads(line) for line in self.file_bytes("history.jsonl").decode().splitlines() if line.strip()]
            keys = []
            for e in epochs:
                keys += [k for k in e if k not in keys]
            self._cache["history"] = {k: np.array([e.get(k, np.nan) for e in epochs], dtype=np.float64) for k in keys}
        return self._cache["history"]

    def _predictions(self, name):
        if name not in self._cache:
            values = np.frombuffer(self.file_bytes(name), "<f4")
            rows = self._rows[name]
            width = values.size // rows if rows else 1
            if rows and values.size != rows * width:
                raise EnsembledError("%s/%s: %d values is not a whole number per row of %d" % (self.dir, name, values.size, rows))
            self._cache[name] = values.reshape(rows, width)[:, 0] if width == 1 else values.reshape(rows, width)
        return self._cache[name]

    @property
    def holdout_pred(self):
        return self._predictions("holdout_pred.f32")

    @property
    def pool_pred(self):
        return self._predictions("pool_pred.f32")

    @property
    def weights(self):
        """weights.bin as numpy arrays (member_weights.py). A TorchScript member's checkpoint is
        checkpoint.pt, a TorchScript archive: EnsembledError saying to load it with torch."""
        if "weights" not in self._cache:
            try:
                data = self.file_bytes("weights.bin")
            except FileNotFoundError:
                if os.path.exists(os.path.join(self.dir, "checkpoint.pt")):
                    raise EnsembledError("%s/checkpoint.pt: a TorchScript module, not weights.bin: "
                                         "torch.jit.load it" % self.dir) from None
                raise
            if not looks_like_member_weights(data):
                raise EnsembledError("%s/weights.bin: not a weights file" % self.dir)
            self._cache["weights"] = parse_member_weights(data, os.path.join(self.dir, "weights.bin"))
        return self._cache["weights"]
