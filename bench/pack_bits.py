#!/usr/bin/env python3
"""Packed = alone at large shapes: for each batch size B and hidden width U, one run trains
K members (U-U-1 MLP, relu, Adam, batch B, 2 epochs on 9000 training rows of 10 features) in
one fused pack (pack_size K), another trains the same members one per task (pack_size 1);
then every member's checkpoint tensors (ensemble-worker compare, bit for bit) and its
holdout_pred.f32 / pool_pred.f32 (byte for byte) are compared. One CPU worker, one thread,
unless --threads says otherwise; MKL_ENABLE_INSTRUCTIONS is passed through (run it once per
ISA level).

Prints one line per case and writes a JSON (--out). Exit status 0 when every case is equal.

Usage: bench/pack_bits.py [--batches 256,512,1024,2048,4096,8192] [--units 128,256]
                          [--members 3] [--threads 1] [--build build] [--out FILE]
"""
import argparse, json, os, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import member_files as MF  # noqa: E402  (a member's files in either results_layout)


def config(state, batch, units, members, pack_size, threads):
    return {"run_name": "packbits", "state_dir": state, "run_seed": 17, "pack_size": pack_size,
            "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": threads},
            "data": {"synthetic": {"initial_rows": 10000, "pool_rows": 300, "holdout_rows": 300}},
            "members": {"count": members,
                        "defaults": {"epochs": 2, "batch_size": batch, "optimizer": "adam",
                                     "layers": [{"units": units, "activation": "relu"},
                                                {"units": units, "activation": "relu"}]}},
            "rounds": {"count": 1}}


def run(build, scratch, name, cfg):
    path = os.path.join(scratch, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    t = time.time()
    r = subprocess.run([os.path.join(build, "ensembled"), "run", "--config", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{name}: ensembled exited {r.returncode}\n{r.stderr[-2000:]}")
    return time.time() - t


def compare(build, a, b):
    r = subprocess.run([os.path.join(build, "ensemble-worker"), "compare", a, b],  # the member directories
                       capture_output=True, text=True)
    verdict = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {"equal": False, "tensor": r.stderr}
    if not verdict.get("equal"):
        return f"tensor {verdict.get('tensor')} (max abs diff {verdict.get('max_abs_diff')})"
    for f in ("holdout_pred.f32", "pool_pred.f32"):  # a, b: <round dir>/members/<name>
        if MF.member_bytes(os.path.dirname(os.path.dirname(a)), os.path.basename(a), f) != \
                MF.member_bytes(os.path.dirname(os.path.dirname(b)), os.path.basename(b), f):
            return f
    return "equal"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="256,512,1024,2048,4096,8192")
    p.add_argument("--units", default="128,256")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", default="")
    a = p.parse_args()
    isa = os.environ.get("MKL_ENABLE_INSTRUCTIONS", "(default)")
    results, all_equal = [], True
    with tempfile.TemporaryDirectory(prefix="pack-bits-") as scratch:
        for units in [int(u) for u in a.units.split(",")]:
            for batch in [int(b) for b in a.batches.split(",")]:
                case = f"b{batch}-u{units}"
                packed, alone = os.path.join(scratch, case + "-packed"), os.path.join(scratch, case + "-alone")
                tp = run(a.build, scratch, case + "-packed", config(packed, batch, units, a.members, a.members, a.threads))
                ta = run(a.build, scratch, case + "-alone", config(alone, batch, units, a.members, 1, a.threads))
                pack_size = MF.member_json(f"{packed}/rounds/r0000", "m000", "metrics.json").get("pack_size", 1)
                if pack_size != a.members:
                    sys.exit(f"{case}: the packed run trained packs of {pack_size}, not {a.members}")
                verdicts = {}
                for k in range(a.members):
                    m = f"m{k:03d}"
                    verdicts[m] = compare(a.build, f"{packed}/rounds/r0000/members/{m}", f"{alone}/rounds/r0000/members/{m}")
                equal = all(v == "equal" for v in verdicts.values())
                all_equal = all_equal and equal
                results.append({"batch": batch, "units": units, "members": a.members, "threads": a.threads,
                                "isa": isa, "equal": equal, "verdicts": verdicts,
                                "packed_s": round(tp, 1), "alone_s": round(ta, 1)})
                print(f"batch {batch:5d} units {units:4d} x{a.members} threads {a.threads} MKL {isa}: "
                      f"{'equal' if equal else 'DIFFERS ' + json.dumps(verdicts)}  ({tp:.0f} s + {ta:.0f} s)", flush=True)
                for d in (packed, alone):
                    subprocess.run(["rm", "-rf", d])
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
