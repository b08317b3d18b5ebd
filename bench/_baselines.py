"""Python baselines that do what seed-001 users do, for bench/round_turnaround.py and
bench/training_throughput.py. Run with the bench venv's python (bench/setup_baselines.sh).

Per round the parent process starts a fresh process per model (multiprocessing, fork,
at most `parallel` at a time), each child trains one member from a NumPy memmap of the
dataset and sends its result back on a queue; after all members of the round are done the
parent appends rows to the memmap and starts the next round.

What each child does mirrors an ensembled task (worker/process/task_runner.cpp, worker/train/trainer.cpp):
seeded random split of the current rows (validation_split), standardisation of x and y from
the training split, model 9 -> 6 sigmoid -> 1 linear (Glorot-uniform kernels, zero biases,
L1L2(1e-5, 1e-4) on both kernels as ensembled applies l1/l2 to every kernel), Huber loss on
the standardised target, Adam(lr), shuffled mini-batches, validation loss/mae/mse after each
epoch, then predictions on the holdout and pool tables, weights + predictions + metrics
written to the member's directory.

"train_seconds" in a child times the same region as ensembled's metric of that name: the
epochs (incl. per-epoch validation) plus holdout/pool prediction; for Keras that includes
the tf.function tracing done by the first fit()/predict() call.

Usage as a program (the parent; only numpy is imported here unless --import-in-parent):
  python _baselines.py --framework keras|torch --spec spec.json --out result.json
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time

import numpy as np


# ----------------------------------------------------------------------------- child side

def _split(rows, validation_split, seed):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(rows)
    nval = max(1, int(round(validation_split * rows)))
    return perm[nval:], perm[:nval]


def _prepare(task):
    """Opens the memmap, splits, standardises. Returns arrays (float32)."""
    f = task["features"]
    mm = np.memmap(task["train_path"], dtype=np.float32, mode="r", shape=(task["rows"], f + 1))
    tr, va = _split(task["rows"], task["validation_split"], task["seed"])
    train = np.asarray(mm[np.sort(tr)])
    val = np.asarray(mm[np.sort(va)])
    mean = train.astype(np.float64).mean(axis=0)
    std = np.maximum(train.astype(np.float64).std(axis=0), 1e-6)
    mean32, std32 = mean.astype(np.float32), std.astype(np.float32)
    norm = lambda a: (a - mean32) / std32
    holdout = np.load(task["holdout_path"], mmap_mode="r")
    pool = np.load(task["pool_path"], mmap_mode="r")
    return {
        "xtr": norm(train)[:, :f], "ytr": norm(train)[:, f],
        "xva": norm(val)[:, :f], "yva": norm(val)[:, f],
        "hold_x": (np.asarray(holdout[:, :f]) - mean32[:f]) / std32[:f],
        "pool_x": (np.asarray(pool[:, :f]) - mean32[:f]) / std32[:f],
        "y_mean": float(mean[f]), "y_std": float(std[f]),
        "n_train": len(tr), "n_val": len(va),
    }


def _finish(task, d, weights, hold_pred, pool_pred, metrics):
    out = task["out_dir"]
    os.makedirs(out, exist_ok=True)
    np.savez(os.path.join(out, "weights.npz"), *weights)
    hold = (hold_pred.reshape(-1) * d["y_std"] + d["y_mean"]).astype(np.float32)
    pool = (pool_pred.reshape(-1) * d["y_std"] + d["y_mean"]).astype(np.float32)
    hold.tofile(os.path.join(out, "holdout_pred.f32"))
    pool.tofile(os.path.join(out, "pool_pred.f32"))
    with open(os.path.join(out, "metrics.json"), "w") as fh:
        json.dump(metrics, fh)


def _keras_model(task):
    import tensorflow as tf
    import keras
    tf.config.threading.set_intra_op_parallelism_threads(task["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(task["seed"] % (2 ** 31))
    reg = keras.regularizers.L1L2(l1=task["l1"], l2=task["l2"])
    init = keras.initializers.GlorotUniform(seed=task["seed"] % (2 ** 31))
    model = keras.Sequential([
        keras.layers.Input(shape=(task["features"],)),
        keras.layers.Dense(task["hidden"], activation="sigmoid", kernel_initializer=init,
                           kernel_regularizer=reg),
        keras.layers.Dense(1, activation="linear", kernel_initializer=init, kernel_regularizer=reg),
    ])
    model.compile(loss=keras.losses.Huber(delta=task["huber_delta"]),
                  optimizer=keras.optimizers.Adam(learning_rate=task["lr"]), metrics=["mae", "mse"])
    return model


def _keras_predict(model, d):
    hold = model.predict(d["hold_x"], batch_size=8192, verbose=0)
    pool = model.predict(d["pool_x"], batch_size=8192, verbose=0) if len(d["pool_x"]) else np.zeros(0)
    return hold, pool


def train_keras(task):
    t_task = time.monotonic()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf  # noqa: F401
    t_import = time.monotonic()
    d = _prepare(task)
    model = _keras_model(task)
    t0 = time.monotonic()
    hist = model.fit(d["xtr"], d["ytr"], validation_data=(d["xva"], d["yva"]), epochs=task["epochs"],
                     batch_size=task["batch_size"], shuffle=True, verbose=0)
    hold_pred, pool_pred = _keras_predict(model, d)
    train_s = time.monotonic() - t0
    steps = task["epochs"] * math.ceil(d["n_train"] / task["batch_size"])
    metrics = {"member": task["name"], "train_seconds": train_s, "steps": steps,
               "import_seconds": t_import - t_task, "val_loss": float(hist.history["val_loss"][-1])}
    _finish(task, d, [w for w in model.get_weights()], hold_pred, pool_pred, metrics)
    metrics["task_seconds"] = time.monotonic() - t_task
    return metrics


def calibrate_keras(task, epochs):
    """Steady-state cost of the training arithmetic in Keras: one warm-up fit() (tracing), then
    a second fit() whose epochs are timed by a callback (each epoch incl. its validation pass),
    and a second predict() on holdout + pool."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import keras
    d = _prepare(task)
    model = _keras_model(task)
    model.fit(d["xtr"], d["ytr"], validation_data=(d["xva"], d["yva"]), epochs=1,
              batch_size=task["batch_size"], verbose=0)
    _keras_predict(model, d)
    times = []

    class T(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.monotonic() - self.t)

    model.fit(d["xtr"], d["ytr"], validation_data=(d["xva"], d["yva"]), epochs=epochs,
              batch_size=task["batch_size"], verbose=0, callbacks=[T()])
    t = time.monotonic()
    _keras_predict(model, d)
    pred_s = time.monotonic() - t
    return {"epoch_seconds": sorted(times)[len(times) // 2], "predict_seconds": pred_s,
            "steps_per_epoch": math.ceil(d["n_train"] / task["batch_size"]), "epochs_timed": len(times)}


def _torch_setup(task):
    import torch
    torch.set_num_threads(task["threads"])
    torch.manual_seed(task["seed"] % (2 ** 63))
    d = _prepare(task)
    f = task["features"]
    model = torch.nn.Sequential(torch.nn.Linear(f, task["hidden"]), torch.nn.Sigmoid(),
                                torch.nn.Linear(task["hidden"], 1))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    opt = torch.optim.Adam(model.parameters(), lr=task["lr"])
    return d, model, opt


def _torch_epoch(task, d, model, opt):
    """One epoch: shuffled mini-batches (loss + L1L2 on both kernels), the running loss/mae/mse
    a Keras or ensembled epoch reports, then the validation pass. Returns val loss."""
    import torch
    loss_fn = torch.nn.HuberLoss(delta=task["huber_delta"])
    kernels = [model[0].weight, model[2].weight]
    xtr, ytr = torch.from_numpy(d["xtr"]), torch.from_numpy(d["ytr"])
    xva, yva = torch.from_numpy(d["xva"]), torch.from_numpy(d["yva"])
    bs, n = task["batch_size"], len(ytr)
    model.train()
    perm = torch.randperm(n)
    loss_sum = abs_sum = sq_sum = 0.0
    for b in range(0, n, bs):
        idx = perm[b:b + bs]
        xb, yb = xtr[idx], ytr[idx]
        pred = model(xb).squeeze(1)
        loss = loss_fn(pred, yb)
        penalty = sum(task["l1"] * w.abs().sum() + task["l2"] * (w * w).sum() for w in kernels)
        opt.zero_grad()
        (loss + penalty).backward()
        opt.step()
        with torch.no_grad():
            err = pred.detach() - yb
            loss_sum += loss.item() * len(idx)
            abs_sum += err.abs().sum().item()
            sq_sum += (err * err).sum().item()
    model.eval()
    with torch.no_grad():
        pv = model(xva).squeeze(1)
        val_loss = loss_fn(pv, yva).item()
        _ = (pv - yva).abs().mean().item(), ((pv - yva) ** 2).mean().item()
    return val_loss


def _torch_predict(model, d):
    import torch
    with torch.no_grad():
        hold = model(torch.from_numpy(np.ascontiguousarray(d["hold_x"]))).numpy()
        pool = model(torch.from_numpy(np.ascontiguousarray(d["pool_x"]))).numpy() if len(d["pool_x"]) \
            else np.zeros(0, np.float32)
    return hold, pool


def train_torch(task):
    t_task = time.monotonic()
    import torch  # noqa: F401
    t_import = time.monotonic()
    d, model, opt = _torch_setup(task)
    t0 = time.monotonic()
    val_loss = None
    for _ in range(task["epochs"]):
        val_loss = _torch_epoch(task, d, model, opt)
    hold_pred, pool_pred = _torch_predict(model, d)
    train_s = time.monotonic() - t0
    steps = task["epochs"] * math.ceil(len(d["ytr"]) / task["batch_size"])
    metrics = {"member": task["name"], "train_seconds": train_s, "steps": steps,
               "import_seconds": t_import - t_task, "val_loss": val_loss}
    _finish(task, d, [p.detach().numpy() for p in model.parameters()], hold_pred, pool_pred, metrics)
    metrics["task_seconds"] = time.monotonic() - t_task
    return metrics


def calibrate_torch(task, epochs):
    """Steady-state cost of the same arithmetic in PyTorch: one warm-up epoch + predict, then
    `epochs` timed epochs (median) and a second predict."""
    d, model, opt = _torch_setup(task)
    _torch_epoch(task, d, model, opt)
    _torch_predict(model, d)
    times = []
    for _ in range(epochs):
        t = time.monotonic()
        _torch_epoch(task, d, model, opt)
        times.append(time.monotonic() - t)
    t = time.monotonic()
    _torch_predict(model, d)
    pred_s = time.monotonic() - t
    return {"epoch_seconds": sorted(times)[len(times) // 2], "predict_seconds": pred_s,
            "steps_per_epoch": math.ceil(len(d["ytr"]) / task["batch_size"]), "epochs_timed": len(times)}


def _child(fn_name, task, queue):
    try:
        res = (train_keras if fn_name == "keras" else train_torch)(task)
        queue.put(("ok", task["name"], res))
    except BaseException as e:  # noqa: BLE001 - report everything to the parent
        import traceback
        queue.put(("err", task["name"], traceback.format_exc()[-3000:]))
        raise SystemExit(1) from e


# ---------------------------------------------------------------------------- parent side

def run(spec):
    """spec: framework, workdir, features, train (initial rows array path .npy), pool_path (.npy),
    holdout_path (.npy), rounds, members, k, epochs, batch_size, validation_split, lr, hidden,
    huber_delta, l1, l2, parallel, threads, run_seed, import_in_parent."""
    t_begin = time.monotonic()
    fw = spec["framework"]
    if spec.get("import_in_parent"):
        # What the seed-001 code does: `import tensorflow as tf` at the top of the parent,
        # so every forked child inherits the imported modules (no per-child import cost).
        if fw == "keras":
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            import tensorflow  # noqa: F401
            import keras  # noqa: F401
        else:
            import torch  # noqa: F401
            import torch._dynamo  # noqa: F401  (torch.optim imports it lazily on first use: ~1.5-2 s)
    t_after_import = time.monotonic()
    work = spec["workdir"]
    os.makedirs(work, exist_ok=True)
    f = spec["features"]
    init = np.load(spec["train_path"])
    pool = np.load(spec["pool_path"], mmap_mode="r")
    cap = init.shape[0] + spec["k"] * spec["rounds"] + 1
    train_path = os.path.join(work, "train.f32")
    mm = np.memmap(train_path, dtype=np.float32, mode="w+", shape=(cap, f + 1))
    mm[:init.shape[0]] = init
    mm.flush()
    rows = init.shape[0]
    pool_next = 0
    ctx = mp.get_context("fork")
    rounds = []
    t_prev = time.monotonic()
    for r in range(spec["rounds"]):
        t_round = time.monotonic()
        queue = ctx.Queue()
        pending = []
        for i in range(spec["members"]):
            pending.append({
                "name": "m%03d" % i, "seed": (spec["run_seed"] * 1000003 + r * 1009 + i) & 0x7FFFFFFF,
                "features": f, "rows": rows, "train_path": train_path,
                "holdout_path": spec["holdout_path"], "pool_path": spec["pool_path"],
                "out_dir": os.path.join(work, "r%04d" % r, "m%03d" % i),
                "epochs": spec["epochs"], "batch_size": spec["batch_size"],
                "validation_split": spec["validation_split"], "lr": spec["lr"], "hidden": spec["hidden"],
                "huber_delta": spec["huber_delta"], "l1": spec["l1"], "l2": spec["l2"],
                "threads": spec["threads"]})
        running = {}
        results = []
        while pending or running:
            while pending and len(running) < spec["parallel"]:
                task = pending.pop(0)
                p = ctx.Process(target=_child, args=(fw, task, queue))
                p.start()
                running[task["name"]] = p
            status, name, res = queue.get()
            running.pop(name).join()
            if status != "ok":
                raise RuntimeError("baseline member %s failed:\n%s" % (name, res))
            results.append(res)
        trained_rows = rows
        # Mutation: append k pool rows to the memmap (what ensembled's append_from_pool does).
        if r + 1 < spec["rounds"] and spec["k"] > 0:
            add = np.asarray(pool[pool_next:pool_next + spec["k"]])
            mm[rows:rows + len(add)] = add
            mm.flush()
            rows += len(add)
            pool_next += len(add)
        t_end = time.monotonic()
        rounds.append({"round": r, "wall_seconds": t_end - t_prev, "dispatch_to_done_seconds": t_end - t_round,
                       "trained_rows": trained_rows,
                       "members": results})
        t_prev = t_end
    total = time.monotonic() - t_begin
    cal = None
    if spec.get("calibrate_epochs", 0) > 0:
        # After the timed rounds, in one more fresh child: the steady-state cost of the same
        # member's arithmetic on the final round's rows (the largest, so the pure training
        # time it implies is an upper bound and the overhead derived from it a lower bound).
        task = dict(task, rows=trained_rows, out_dir=os.path.join(work, "calibration"))
        q = ctx.Queue()
        p = ctx.Process(target=_calibrate_child, args=(fw, task, spec["calibrate_epochs"], q))
        p.start()
        status, cal = q.get()
        p.join()
        if status != "ok":
            raise RuntimeError("calibration failed:\n%s" % cal)
    return {"framework": fw, "total_seconds": total, "parent_import_seconds": t_after_import - t_begin,
            "rounds": rounds, "calibration": cal}


def _calibrate_child(fw, task, epochs, queue):
    try:
        queue.put(("ok", (calibrate_keras if fw == "keras" else calibrate_torch)(task, epochs)))
    except BaseException:  # noqa: BLE001
        import traceback
        queue.put(("err", traceback.format_exc()[-3000:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.spec) as fh:
        spec = json.load(fh)
    res = run(spec)
    with open(a.out, "w") as fh:
        json.dump(res, fh)


if __name__ == "__main__":
    main()
