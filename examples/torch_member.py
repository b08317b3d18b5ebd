#!/usr/bin/env python3
"""A PyTorch member for ensembled: a member with "model": {"kind": "command", ...}.

ensembled runs this once per member and round, in the worker's slot (CUDA_VISIBLE_DEVICES,
thread limits) with the ENSEMBLED_* variables of README "Command members". It trains a small
MLP on the member's rows, keeps the epoch with the best validation loss, and writes what a
command member must write into $ENSEMBLED_OUTPUT_DIR:
    holdout_pred.npy, pool_pred.npy   float32, one prediction per row
    history.jsonl, metrics.json       optional: per-epoch and final numbers
    model.pt                          anything else: here the weights, for `predict`
Run as `torch_member.py predict` (the member's "predict_argv") it predicts
$ENSEMBLED_PREDICT_X into $ENSEMBLED_PREDICT_OUTPUT with the saved weights, which is what
`ensemblectl predict` needs.

Seeds come from ensembled (ENSEMBLED_SEED_INIT, ENSEMBLED_SEED_SHUFFLE), and on the CPU
torch's deterministic algorithms give the same bits again, so `ensemblectl verify` finds
the rerun equal.
Usage in a config:
    "model": {"kind": "command",
              "argv": ["/path/to/venv/bin/python", "examples/torch_member.py", "--epochs", "60"],
              "predict_argv": ["/path/to/venv/bin/python", "examples/torch_member.py", "predict"]}
"""
import argparse
import json
import os
import sys

import numpy as np
import torch


def build(features, hidden):
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 1))


def predict_rows(model, x, mean, std):
    with torch.no_grad():
        return model((torch.from_numpy(x) - mean) / std).squeeze(1).numpy().astype(np.float32)


def train(args):
    env = os.environ
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(int(env.get("ENSEMBLED_THREADS", "1")))
    torch.manual_seed(int(env["ENSEMBLED_SEED_INIT"]) % (2**63))
    shuffle = torch.Generator().manual_seed(int(env["ENSEMBLED_SEED_SHUFFLE"]) % (2**63))
    x, y = np.load(env["ENSEMBLED_TRAIN_X"]), np.load(env["ENSEMBLED_TRAIN_Y"])
    vx, vy = np.load(env["ENSEMBLED_VAL_X"]), np.load(env["ENSEMBLED_VAL_Y"])
    mean = torch.from_numpy(x.mean(axis=0))
    std = torch.from_numpy(x.std(axis=0)).clamp_min(1e-6)
    tx, ty = (torch.from_numpy(x) - mean) / std, torch.from_numpy(y)
    tvx, tvy = (torch.from_numpy(vx) - mean) / std, torch.from_numpy(vy)
    model = build(x.shape[1], args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    out = env["ENSEMBLED_OUTPUT_DIR"]
    best, best_state, history = float("inf"), None, []
    for epoch in range(args.epochs):
        order = torch.randperm(len(tx), generator=shuffle)
        for i in range(0, len(tx), args.batch_size):
            idx = order[i:i + args.batch_size]
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(tx[idx]).squeeze(1), ty[idx])
            loss.backward()
            opt.step()
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(tvx).squeeze(1), tvy).item()
        history.append({"epoch": epoch, "loss": loss.item(), "val_loss": val})
        if val < best:
            best, best_state = val, {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    torch.save({"state": best_state, "mean": mean, "std": std, "hidden": args.hidden}, os.path.join(out, "model.pt"))
    for name, var in (("holdout_pred.npy", "ENSEMBLED_HOLDOUT_X"), ("pool_pred.npy", "ENSEMBLED_POOL_X")):
        np.save(os.path.join(out, name), predict_rows(model, np.load(env[var]), mean, std))
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        f.writelines(json.dumps(h) + "\n" for h in history)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"best_val_loss": best, "epochs": args.epochs, "torch": torch.__version__}, f)
    print(f"{env['ENSEMBLED_MEMBER']}: {len(x)} rows, best val_loss {best:.4f}")


def predict():
    env = os.environ
    saved = torch.load(os.path.join(env["ENSEMBLED_MODEL_DIR"], "model.pt"))
    x = np.load(env["ENSEMBLED_PREDICT_X"])
    model = build(x.shape[1], saved["hidden"])
    model.load_state_dict(saved["state"])
    np.save(env["ENSEMBLED_PREDICT_OUTPUT"], predict_rows(model, x, saved["mean"], saved["std"]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["predict"]:
        predict()
    else:
        p = argparse.ArgumentParser()
        p.add_argument("--epochs", type=int, default=60)
        p.add_argument("--batch-size", type=int, default=32)
        p.add_argument("--hidden", type=int, default=32)
        p.add_argument("--lr", type=float, default=1e-2)
        train(p.parse_args())
