#!/usr/bin/env python3
"""ensembled's fused pack beside what a user would write in PyTorch instead (issue 52 item 2).

The same members everywhere: the seed-000 network (9 inputs -> 6 sigmoid -> 1 linear), Huber
loss (delta 0.35), Adam (lr 1e-3), batch 32, 800 training rows of Friedman #1 with 9 features,
each member its own shuffle every epoch; one thread everywhere. Per case K x E (K members,
E epochs), `--reps` interleaved repeats of:
  ensembled          one fused pack of K through the daemon (bench/pack_throughput.py's run():
                     checkpoints on, state on the disk); its training loop's member-steps/s
  vmap               torch.func: stacked parameters [K, ...], functional_call under vmap, one
                     Adam over the stacked tensors (Adam is elementwise: each member its own)
  vmap + compile     the same step under torch.compile
  vmap(grad) + Adam  bench/vmap_ensemble.py: vmap over the members of the loss's gradient and a
    compiled         vectorised Adam, the whole step under torch.compile (the fastest peer we
                     wrote; 640 rows of its own synthetic data, a separate process)
  one at a time      K nn.Sequential models, each with its own Adam, trained one after another
                     (skipped above --one-max members: ~2k member-steps/s)
and prints the median member-steps/s of each (steps = K x E x ceil(800 / 32)) and each peer's
ratio to ensembled. Needs torch (the setup's venv has 2.11). torch.compile needs a C++
compiler (g++ is there).

With --members uci the members are the UCI protocol's (bench/uci_deep_ensembles.py: 9 -> 50 relu
-> mean and variance, gaussian NLL, adversarial training with eps 0.01, Adam lr 0.01, batch
100) against vmap and vmap + compile of the same step (autograd.grad for the adversarial rows);
steps = K x E x ceil(800 / 100).

Usage: bench/peer_ensembles.py [--members seed000|uci] [--cases 512x20,64x20] [--reps 3] [--build build]
                               [--one-max 64] [--out bench/results/peer_ensembles[_uci].json]
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack_throughput  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS, FEATURES, HIDDEN, BATCH, DELTA, LR = 800, 9, 6, 32, 0.35, 1e-3


def friedman(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, FEATURES, generator=g)
    y = (10 * torch.sin(math.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
         + torch.randn(n, generator=g))
    x = (x - x.mean(0)) / x.std(0)
    return x, ((y - y.mean()) / y.std()).unsqueeze(1)


def stacked_params(k, seed=0):
    g = torch.Generator().manual_seed(seed)
    def glorot(fan_in, fan_out):
        a = math.sqrt(6.0 / (fan_in + fan_out))
        return (torch.rand(k, fan_out, fan_in, generator=g) * 2 - 1) * a
    return [glorot(FEATURES, HIDDEN).requires_grad_(), torch.zeros(k, HIDDEN, requires_grad=True),
            glorot(HIDDEN, 1).requires_grad_(), torch.zeros(k, 1, requires_grad=True)]


def member_forward(w1, b1, w2, b2, x):
    return torch.sigmoid(x @ w1.T + b1) @ w2.T + b2


def vmap_steps_per_s(k, epochs, compiled):
    x, y = friedman(ROWS)
    params = stacked_params(k)
    opt = torch.optim.Adam(params, lr=LR)
    batched = torch.func.vmap(member_forward)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.huber_loss(batched(*params, xb), yb, delta=DELTA, reduction="sum") / BATCH
        loss.backward()
        opt.step()

    run = torch.compile(step) if compiled else step
    g = torch.Generator().manual_seed(1)
    steps_per_epoch = math.ceil(ROWS / BATCH)
    # A warm-up epoch (compilation, allocator) outside the clock.
    for e in range(epochs + 1):
        if e == 1:
            t0 = time.perf_counter()
        order = torch.argsort(torch.rand(k, ROWS, generator=g), dim=1)  # each member its own shuffle
        for s in range(steps_per_epoch):
            idx = order[:, s * BATCH:(s + 1) * BATCH]
            run(x[idx], y[idx])
    return k * epochs * steps_per_epoch / (time.perf_counter() - t0)


# The UCI protocol's members (bench/uci_deep_ensembles.py): 9 -> 50 relu -> mean and variance,
# gaussian NLL, fast-gradient-sign adversarial training (eps 0.01 of each feature's range), Adam
# lr 0.01, batch 100.
UCI_UNITS, UCI_BATCH, UCI_LR, UCI_EPS = 50, 100, 0.01, 0.01
UCI_MEMBER = {"layers": [{"units": UCI_UNITS, "activation": "relu"}], "loss": "gaussian_nll", "optimizer": "adam",
              "lr": UCI_LR, "batch_size": UCI_BATCH, "validation_split": 0.2, "initializer": "torch_default",
              "adversarial_eps": UCI_EPS}


def uci_forward(w1, b1, w2, b2, x):
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def gaussian_nll(out, y):
    var = torch.nn.functional.softplus(out[..., 1:]) + 1e-6
    return (0.5 * (var.log() + (out[..., :1] - y) ** 2 / var)).squeeze(-1)


def vmap_uci_steps_per_s(k, epochs, compiled):
    """The UCI members side by side under vmap, the adversarial rows by autograd.grad inside
    the step (as bench/uci_deep_ensembles.py's PyTorch copy does it), optionally compiled."""
    x, y = friedman(ROWS)
    step_size = UCI_EPS * (x.max(0).values - x.min(0).values)  # x is standardised: range / std = range
    g = torch.Generator().manual_seed(0)
    bound1, bound2 = 1 / math.sqrt(FEATURES), 1 / math.sqrt(UCI_UNITS)
    params = [((torch.rand(k, UCI_UNITS, FEATURES, generator=g) * 2 - 1) * bound1).requires_grad_(),
              ((torch.rand(k, UCI_UNITS, generator=g) * 2 - 1) * bound1).requires_grad_(),
              ((torch.rand(k, 2, UCI_UNITS, generator=g) * 2 - 1) * bound2).requires_grad_(),
              ((torch.rand(k, 2, generator=g) * 2 - 1) * bound2).requires_grad_()]
    opt = torch.optim.Adam(params, lr=UCI_LR)
    batched = torch.func.vmap(uci_forward)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        xb = xb.clone().requires_grad_(True)
        loss = gaussian_nll(batched(*params, xb), yb).mean(1).sum()
        gx, = torch.autograd.grad(loss, xb, retain_graph=True)
        loss = loss + gaussian_nll(batched(*params, (xb + step_size * gx.sign()).detach()), yb).mean(1).sum()
        loss.backward()
        opt.step()

    run = torch.compile(step) if compiled else step
    steps_per_epoch = math.ceil(ROWS / UCI_BATCH)
    for e in range(epochs + 1):  # a warm-up epoch outside the clock
        if e == 1:
            t0 = time.perf_counter()
        order = torch.argsort(torch.rand(k, ROWS, generator=g), dim=1)
        for s in range(steps_per_epoch):
            idx = order[:, s * UCI_BATCH:(s + 1) * UCI_BATCH]
            run(x[idx], y[idx])
    return k * epochs * steps_per_epoch / (time.perf_counter() - t0)


def one_at_a_time_steps_per_s(k, epochs):
    x, y = friedman(ROWS)
    steps_per_epoch = math.ceil(ROWS / BATCH)
    t0 = time.perf_counter()
    for m in range(k):
        torch.manual_seed(m)
        net = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Sigmoid(), torch.nn.Linear(HIDDEN, 1))
        opt = torch.optim.Adam(net.parameters(), lr=LR)
        for _ in range(epochs):
            order = torch.randperm(ROWS)
            for s in range(steps_per_epoch):
                idx = order[s * BATCH:(s + 1) * BATCH]
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.huber_loss(net(x[idx]), y[idx], delta=DELTA).backward()
                opt.step()
    return k * epochs * steps_per_epoch / (time.perf_counter() - t0)


def vmap_grad_compiled_steps_per_s(k, epochs, work):
    out = os.path.join(work, "vmap_ensemble.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "vmap_ensemble.py"), "--members", str(k),
                    "--epochs", str(epochs), "--threads", "1", "--out", out], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return json.load(open(out))["member_steps_per_s"]


def ensembled_steps_per_s(build, k, epochs, work, member=None):
    # A fresh directory each repeat: in one already used, the daemon resumes the finished run
    # (until 2026-12-06 every repeat reported the first one's figure).
    d = tempfile.mkdtemp(prefix=f"k{k}x{epochs}-", dir=work)
    return pack_throughput.run(build, k, epochs, k, d, member=member)["train_member_steps_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="512x20,64x20")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--one-max", type=int, default=64, help="largest K also trained one model at a time")
    ap.add_argument("--members", choices=("seed000", "uci"), default="seed000",
                    help="uci: the UCI protocol's gaussian, adversarially trained members (vmap peers only)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.out is None:
        a.out = os.path.join(ROOT, "bench", "results", "peer_ensembles" + ("_uci" if a.members == "uci" else "") + ".json")
    uci = a.members == "uci"
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ens-peers-", dir=pack_throughput.default_work_root()) as work:
        for case in a.cases.split(","):
            k, e = (int(v) for v in case.split("x"))
            got = {"ensembled": [], "vmap": [], "vmap + compile": [], "vmap(grad)+Adam compiled": [],
                   "one at a time": []}
            for _ in range(a.reps):  # interleaved: machine noise falls on every method alike
                if uci:
                    got["ensembled"].append(ensembled_steps_per_s(a.build, k, e, work, UCI_MEMBER))
                    got["vmap"].append(vmap_uci_steps_per_s(k, e, compiled=False))
                    got["vmap + compile"].append(vmap_uci_steps_per_s(k, e, compiled=True))
                    continue
                got["ensembled"].append(ensembled_steps_per_s(a.build, k, e, work))
                got["vmap"].append(vmap_steps_per_s(k, e, compiled=False))
                got["vmap + compile"].append(vmap_steps_per_s(k, e, compiled=True))
                got["vmap(grad)+Adam compiled"].append(vmap_grad_compiled_steps_per_s(k, e, work))
                if k <= a.one_max:
                    got["one at a time"].append(one_at_a_time_steps_per_s(k, e))
            med = {m: statistics.median(v) for m, v in got.items() if v}
            rows.append({"members": k, "epochs": e, "median_member_steps_per_s": med,
                         "runs": {m: v for m, v in got.items() if v}})
            print(f"{k} x {e}:")
            for m, v in med.items():
                ratio = med["ensembled"] / v
                print(f"  {m:26} {v:12.0f} member-steps/s" + ("" if m == "ensembled" else f"   ensembled is {ratio:.2f}x"))
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": f"bench/peer_ensembles.py --members {a.members} --cases {a.cases} --reps {a.reps} --one-max {a.one_max}",
           "machine": "this machine, one thread each", "torch": torch.__version__, "cases": rows}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(out, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
