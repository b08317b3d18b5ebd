#!/usr/bin/env python3
"""A Keras member for ensembled, in the style of the question that started the project:
one process per model, pinned to its GPU, training a Keras model with model.fit.

Keras 3 on the torch backend (KERAS_BACKEND=torch unless set; scripts/setup installs Keras into
the project's venv, next to its torch). ensembled does the rest: it starts this in the worker's
slot (CUDA_VISIBLE_DEVICES already names the slot's GPU, so the script does not pick one),
hands it the member's rows as .npy files, and after the round updates the data and starts the
next one. What it writes into $ENSEMBLED_OUTPUT_DIR is the command-member contract (README
"Command members"): holdout_pred.npy and pool_pred.npy, plus history.jsonl, metrics.json and
the model file. `keras_member.py predict` is the member's predict_argv.
    "model": {"kind": "command",
              "argv": ["/path/to/venv/bin/python", "examples/keras_member.py", "--epochs", "30"],
              "predict_argv": ["/path/to/venv/bin/python", "examples/keras_member.py", "predict"]}

Reproducible as far as Keras allows: the member's seed (ENSEMBLED_SEED_INIT) seeds Keras,
numpy, Python and torch (keras.utils.set_random_seed), torch runs deterministic algorithms on
the slot's thread count, so the same member on the same CPU gives the same bits alone or in the
loop (tests/keras_member_test.cpp checks it). On a GPU, cuDNN and cuBLAS choices may differ.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")
import numpy as np  # noqa: E402
import keras  # noqa: E402

env = os.environ


def pin_backend():
    """One thread count and deterministic kernels, where the backend lets us."""
    threads = int(env.get("ENSEMBLED_THREADS", "1"))
    if keras.backend.backend() == "torch":
        import torch
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True)


def model_for(features, units, seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input(shape=(features,)),
                              keras.layers.Normalization(name="norm"),
                              keras.layers.Dense(units, activation="relu"),
                              keras.layers.Dense(units, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    return model


def train(args):
    pin_backend()
    x, y = np.load(env["ENSEMBLED_TRAIN_X"]), np.load(env["ENSEMBLED_TRAIN_Y"])
    vx, vy = np.load(env["ENSEMBLED_VAL_X"]), np.load(env["ENSEMBLED_VAL_Y"])
    model = model_for(x.shape[1], args.units, int(env["ENSEMBLED_SEED_INIT"]) % (2**31))
    model.get_layer("norm").adapt(x)
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, restore_best_weights=True)
    fit = model.fit(x, y, validation_data=(vx, vy), epochs=args.epochs, batch_size=32, shuffle=True,
                    callbacks=[stop], verbose=0)
    out = env["ENSEMBLED_OUTPUT_DIR"]
    model.save(os.path.join(out, "model.keras"))
    for name, var in (("holdout_pred.npy", "ENSEMBLED_HOLDOUT_X"), ("pool_pred.npy", "ENSEMBLED_POOL_X")):
        np.save(os.path.join(out, name), np.asarray(model.predict(np.load(env[var]), verbose=0))[:, 0].astype(np.float32))
    hist = fit.history
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        for e in range(len(hist["loss"])):
            f.write(json.dumps({"epoch": e, "loss": hist["loss"][e], "val_loss": hist["val_loss"][e]}) + "\n")
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"best_val_loss": min(hist["val_loss"]), "keras": keras.__version__,
                   "backend": keras.backend.backend()}, f)
    print(f"{env['ENSEMBLED_MEMBER']}: {len(x)} rows, {len(hist['loss'])} epochs, best val_loss {min(hist['val_loss']):.4f}")


def predict():
    pin_backend()
    model = keras.saving.load_model(os.path.join(env["ENSEMBLED_MODEL_DIR"], "model.keras"))
    x = np.load(env["ENSEMBLED_PREDICT_X"])
    np.save(env["ENSEMBLED_PREDICT_OUTPUT"], np.asarray(model.predict(x, verbose=0))[:, 0].astype(np.float32))


if __name__ == "__main__":
    if sys.argv[1:2] == ["predict"]:
        predict()
    else:
        p = argparse.ArgumentParser()
        p.add_argument("--epochs", type=int, default=30)
        p.add_argument("--units", type=int, default=32)
        train(p.parse_args())
