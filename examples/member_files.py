#!/usr/bin/env python3
"""A member's files, whichever results_layout wrote them: kept for the scripts that import it
(bench/, tests/support/member_files_py.h); the code is the Python package's,
python/ensembled/member_files.py (docs/python.md), which this re-exports. Needs only the
standard library: the package's sibling folder is put on sys.path when there is one, else an
installed `ensembled` is used.

    import member_files as mf
    names = mf.round_members(state + "/rounds/r0001")
    pred = np.frombuffer(mf.member_bytes(state + "/rounds/r0001", "m003", "holdout_pred.f32"), "<f4")
    metrics = mf.member_json(state + "/rounds/r0001", "m003", "metrics.json")

As a command: member_files.py ROUND_DIR MEMBER FILE  writes the file's bytes to stdout.
"""
import os
import sys

_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
if os.path.isdir(os.path.join(_PACKAGE_DIR, "ensembled")) and _PACKAGE_DIR not in sys.path:
    sys.path.insert(0, _PACKAGE_DIR)

from ensembled.member_files import member_bytes, member_json, member_pack, round_members  # noqa: E402,F401

if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: member_files.py ROUND_DIR MEMBER FILE")
    sys.stdout.buffer.write(member_bytes(*sys.argv[1:]))
