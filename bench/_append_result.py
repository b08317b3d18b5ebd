#!/usr/bin/env python3
"""Appends the last "JSON {...}" line of a C++ benchmark's output to bench/results/<name>.json,
with the time, the CPU count and the load average (for the bench/*.sh scripts).

Usage: bench/_append_result.py OUTPUT_TXT NAME
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def main():
    out_txt, name = sys.argv[1], sys.argv[2]
    lines = [line for line in open(out_txt) if line.startswith("JSON ")]
    if not lines:
        sys.exit("no JSON line in " + out_txt)
    res = json.loads(lines[-1][5:])
    info = C.machine_info()
    res["utc"] = info["utc"]
    res["nproc"] = info["nproc"]
    res["loadavg"] = open("/proc/loadavg").read().split()[:3]
    C.write_result(name, res)


if __name__ == "__main__":
    main()
