"""An MLP member's checkpoint, weights.bin (common/state/member_weights.h), as numpy arrays.

Layout (little-endian): "ENSWGT01"; u64 header length H; H bytes of JSON {"spec": the member
spec's JSON text, "source": the module's TorchScript source, "tensors": [{"name", "shape"}]};
then each tensor's float32 values, row-major, in "tensors" order, nothing between: the
model's layers (layer<i>_weight [out, in], layer<i>_bias [out]) then x_mean, x_std, y_mean,
y_std (the standardisation the module applies).

parse_member_weights(data, path) -> MemberWeights; anything that is not such a file, or is
cut short, is CorruptState naming `path`. Pure.
"""
import json
import struct

import numpy as np

from .errors import CorruptState

MAGIC = b"ENSWGT01"


class MemberWeights:
    """spec (dict), source (str), tensors: name -> float32 array, in the file's order."""

    def __init__(self, spec, source, tensors):
        self.spec, self.source, self.tensors = spec, source, tensors

    def __getitem__(self, name):
        return self.tensors[name]

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self):
        return len(self.tensors)

    def __repr__(self):
        shapes = ", ".join("%s%s" % (n, list(t.shape)) for n, t in self.tensors.items())
        return "MemberWeights(%s)" % shapes


def looks_like_member_weights(data):
    return data[:8] == MAGIC


def parse_member_weights(data, path):
    if len(data) < 16 or not looks_like_member_weights(data):
        raise CorruptState("%s: not a weights file (no %s magic)" % (path, MAGIC.decode()))
    (header_len,) = struct.unpack_from("<Q", data, 8)
    if 16 + header_len > len(data):
        raise CorruptState("%s: cut short: its header needs %d bytes, the file has %d" % (path, 16 + header_len, len(data)))
    try:
        header = json.loads(data[16:16 + header_len].decode())
        spec = json.loads(header["spec"])
        entries = [(t["name"], tuple(int(d) for d in t["shape"])) for t in header["tensors"]]
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptState("%s: header is not a weights header (%s)" % (path, e)) from None
    tensors, at = {}, 16 + header_len
    for name, shape in entries:
        n = int(np.prod(shape, dtype=np.int64))
        if at + 4 * n > len(data):
            raise CorruptState("%s: cut short in tensor %s" % (path, name))
        tensors[name] = np.frombuffer(data, "<f4", count=n, offset=at).reshape(shape).copy()
        at += 4 * n
    return MemberWeights(spec, header.get("source", ""), tensors)
