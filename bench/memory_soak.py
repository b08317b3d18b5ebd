#!/usr/bin/env python3
"""Memory soak: 1000 models of the seed-003 shape (100 -> 1000 -> 5000 -> 1, swish) trained
one after another through the real daemon (one CPU worker), once with recycling off and once
with the default recycling policy. Writes bench/results/memory_soak.csv (RSS after each task),
bench/results/memory_soak.svg (the chart) and prints the RSS growth from task 10 to the last.

Usage: bench/memory_soak.py [--models 1000] [--build build]
Small data and one short epoch per model, so it fits minutes on 2 CPU cores.
"""
import argparse, json, os, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import member_files as MF  # noqa: E402  (a member's files in either results_layout)


def config(state_dir, models, recycle):
    cfg = {
        "run_name": "memory-soak", "state_dir": state_dir, "run_seed": 3,
        "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
        "data": {"source": "synthetic",
                 "synthetic": {"features": 100, "initial_rows": 80, "pool_rows": 0, "holdout_rows": 16}},
        "members": {"defaults": {"epochs": 1, "batch_size": 32, "validation_split": 0.2,
                                 "layers": [{"units": 1000, "activation": "swish"},
                                            {"units": 5000, "activation": "swish"}]},
                    "count": models},
        "rounds": {"count": 1},
        "save_checkpoints": False,
    }
    if not recycle:
        cfg["recycle"] = {"after_tasks": 0, "rss_mb": 0, "rss_growth_pct": 0, "gpu_reserved_mb": 0}
    return cfg


def run(build, models, recycle, workdir):
    state = os.path.join(workdir, "recycle-on" if recycle else "recycle-off")
    path = state + ".json"
    with open(path, "w") as f:
        json.dump(config(state, models, recycle), f)
    t0 = time.time()
    r = subprocess.run([os.path.join(build, "ensembled"), "run", "--config", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        sys.exit("ensembled failed:\n" + r.stderr[-3000:])
    rows = []
    rdir = os.path.join(state, "rounds", "r0000")
    for name in MF.round_members(rdir):
        m = MF.member_json(rdir, name, "metrics.json")
        rows.append((m["index"], m["rss_kb_after"], m["rss_kb_peak"], m["pid"]))
    rows.sort()
    return rows, wall


def growth(rows):
    base = rows[9][1]  # task 10
    return 100.0 * (rows[-1][1] - base) / base


def svg(series, path):
    w, h, pad = 800, 400, 60
    allv = [r[1] / 1024 for rows in series.values() for r in rows]
    lo, hi = min(allv) * 0.95, max(allv) * 1.05
    n = max(len(rows) for rows in series.values())
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w/2}" y="20" text-anchor="middle" font-size="14">RSS after each task (MiB), {n} models of 100-1000-5000-1</text>',
           f'<line x1="{pad}" y1="{h-pad}" x2="{w-20}" y2="{h-pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{h-pad}" x2="{pad}" y2="30" stroke="black"/>']
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        y = h - pad - (h - pad - 30) * i / 4
        out.append(f'<text x="{pad-5}" y="{y+4}" text-anchor="end">{v:.0f}</text>')
    out.append(f'<text x="{w/2}" y="{h-20}" text-anchor="middle">task</text>')
    colors = {"recycling off": "#d62728", "recycling on (defaults)": "#1f77b4"}
    for k, (name, rows) in enumerate(series.items()):
        pts = " ".join(f"{pad + (w-pad-20) * i / max(1, n-1):.1f},{h - pad - (h-pad-30) * (r[1]/1024 - lo) / (hi - lo):.1f}"
                       for i, r in enumerate(rows))
        out.append(f'<polyline fill="none" stroke="{colors.get(name, "black")}" stroke-width="1.5" points="{pts}"/>')
        out.append(f'<text x="{w-200}" y="{50 + 16*k}" fill="{colors.get(name, "black")}">{name}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    results = os.path.join(ROOT, "bench", "results")
    os.makedirs(results, exist_ok=True)
    series, summary = {}, {}
    with tempfile.TemporaryDirectory(prefix="ens-soak-") as work:
        for recycle in (False, True):
            name = "recycling on (defaults)" if recycle else "recycling off"
            rows, wall = run(args.build, args.models, recycle, work)
            series[name] = rows
            summary[name] = {"models": len(rows), "wall_s": round(wall, 1),
                             "rss_mib_task10": round(rows[9][1] / 1024, 1),
                             "rss_mib_last": round(rows[-1][1] / 1024, 1),
                             "growth_pct_10_to_last": round(growth(rows), 2),
                             "worker_processes": len({r[3] for r in rows})}
    with open(os.path.join(results, "memory_soak.csv"), "w") as f:
        f.write("task,rss_kb_off,rss_kb_on,peak_kb_off,peak_kb_on\n")
        off, on = series["recycling off"], series["recycling on (defaults)"]
        for a, b in zip(off, on):
            f.write(f"{a[0]+1},{a[1]},{b[1]},{a[2]},{b[2]}\n")
    svg(series, os.path.join(results, "memory_soak.svg"))
    summary["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    summary["command"] = "bench/memory_soak.py --models %d" % args.models
    json.dump(summary, open(os.path.join(results, "memory_soak.json"), "w"), indent=2)
    print(f"{'policy':28} {'models':>6} {'workers':>7} {'RSS@10 MiB':>11} {'RSS@last MiB':>12} {'growth':>8} {'wall s':>7}")
    for name in series:
        s = summary[name]
        print(f"{name:28} {s['models']:6d} {s['worker_processes']:7d} {s['rss_mib_task10']:11.1f} "
              f"{s['rss_mib_last']:12.1f} {s['growth_pct_10_to_last']:7.2f}% {s['wall_s']:7.1f}")


if __name__ == "__main__":
    main()
