"""A run's data tables, state_dir/data/{train,holdout,pool}.bin (common/state/dataset_segment.h), as
numpy arrays.

Layout (little-endian): a 4096-byte header (magic "ENSDSET1", u32 layout_version 1, u32
dtype 1 = float32, u64 generation, u64 rows, u64 capacity_rows, u32 features, u32 targets
(0 reads as 1), u64 checksum), then capacity_rows rows of features + targets float32; the
first `rows` are the table (the training table's generation g is a prefix of it, the journal
says how long). A classifier's target is its class index (run.json "classes" names them).

read_segment(path) -> Segment with x [rows, features] and y [rows] (or [rows, targets] with
several targets), float32 copies. A file whose header does not match is CorruptState naming
it. Pure.
"""
import struct

import numpy as np

from .errors import CorruptState

HEADER_BYTES = 4096
_HEADER = struct.Struct("<8sIIQQQIIQ")


class Segment:
    def __init__(self, generation, x, y):
        self.generation, self.x, self.y = generation, x, y

    @property
    def rows(self):
        return len(self.x)


def read_segment(path):
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        if len(head) < _HEADER.size:
            raise CorruptState("%s: shorter than a segment header" % path)
        magic, version, dtype, generation, rows, capacity, features, targets, _ = _HEADER.unpack_from(head)
        if magic != b"ENSDSET1" or version != 1 or dtype != 1:
            raise CorruptState("%s: not a dataset segment (magic, layout version or dtype)" % path)
        targets = targets or 1
        width = features + targets
        values = np.fromfile(f, "<f4", count=rows * width)
    if rows > capacity or values.size != rows * width:
        raise CorruptState("%s: holds fewer rows than its header's %d" % (path, rows))
    table = values.reshape(rows, width)
    y = table[:, features] if targets == 1 else table[:, features:]
    return Segment(generation, table[:, :features].copy(), y.copy())
