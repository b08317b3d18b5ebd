#!/usr/bin/env python3
"""The same ensemble trained as a torch.compile'd vmap in plain PyTorch, for comparison with
ensembled's fused pack (issue 52 item 1: ">= 4x a torch.compile'd vmap ensemble").

    python3 bench/vmap_ensemble.py [--members 512] [--epochs 20] [--threads 1] [--out FILE]

K seed-000-shaped members (9 -> 6 sigmoid -> 1, Huber delta 0.35, Adam lr 1e-3, batch 32) on
640 training rows of synthetic data, each member its own shuffle per epoch: one step is
torch.func.vmap over the members' stacked parameters of the loss's gradient (functional_call
+ grad), then a vectorised Adam update over the stacked tensors, the whole step under
torch.compile. The first epoch (compilation) is not timed; the figure is member-steps per
second over the other epochs, on `--threads` CPU threads (ensembled's bench: 1).
"""
import argparse, json, time

import torch
from torch.func import functional_call, grad, vmap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=640)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    K, B, F, U = a.members, 32, 9, 6
    x = torch.randn(a.rows, F)
    y = (x[:, :3].sum(1, keepdim=True).sin() + 0.1 * torch.randn(a.rows, 1))
    net = torch.nn.Sequential(torch.nn.Linear(F, U), torch.nn.Sigmoid(), torch.nn.Linear(U, 1))
    params = {n: torch.stack([torch.nn.init.normal_(p.detach().clone(), std=0.3) for _ in range(K)])
              for n, p in net.named_parameters()}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}

    def loss(p, xb, yb):
        return torch.nn.functional.huber_loss(functional_call(net, p, (xb,)), yb, delta=0.35)

    per_member_grad = vmap(grad(loss))

    @torch.compile
    def step(params, m, v, xb, yb, t):
        g = per_member_grad(params, xb, yb)
        out_p, out_m, out_v = {}, {}, {}
        for n in params:
            out_m[n] = m[n] * 0.9 + g[n] * 0.1
            out_v[n] = v[n] * 0.999 + g[n] * g[n] * 0.001
            mh = out_m[n] / (1 - 0.9 ** t)
            vh = out_v[n] / (1 - 0.999 ** t)
            out_p[n] = params[n] - 1e-3 * mh / (vh.sqrt() + 1e-8)
        return out_p, out_m, out_v

    steps_per_epoch = (a.rows + B - 1) // B
    gen = torch.Generator().manual_seed(1)
    t, timed_steps, start = 0, 0, None
    for epoch in range(a.epochs + 1):  # epoch 0 compiles (not timed)
        if epoch == 1:
            start = time.perf_counter()
        order = torch.stack([torch.randperm(a.rows, generator=gen) for _ in range(K)])  # [K, rows]
        for s in range(steps_per_epoch):
            ix = order[:, s * B:(s + 1) * B]
            t += 1
            params, m, v = step(params, m, v, x[ix], y[ix], torch.tensor(float(t)))  # a tensor: no recompile per step
            if epoch > 0:
                timed_steps += 1
    secs = time.perf_counter() - start
    r = {"members": K, "epochs_timed": a.epochs, "threads": a.threads, "member_steps": timed_steps * K,
         "seconds": round(secs, 3), "member_steps_per_s": round(timed_steps * K / secs, 1), "torch": torch.__version__}
    print(json.dumps(r))
    if a.out:
        json.dump(r, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
