#!/usr/bin/env python3
"""A Keras member for ensembled, in the style of the question that started the project:
one process per model, pinned to its GPU, training a Keras model with model.fit.

ensembled does the rest: it starts this in the worker's slot (CUDA_VISIBLE_DEVICES already
names the slot's GPU, so the script does not pick one), hands it the member's rows as .npy
files, and after the round updates the data and starts the next one. What it writes into
$ENSEMBLED_OUTPUT_DIR is the command-member contract (README "Command members"):
holdout_pred.npy and pool_pred.npy, plus history.jsonl, metrics.json and the model file.
`keras_member.py predict` is the member's predict_argv.
    "model": {"kind": "command",
              "argv": ["/path/to/venv/bin/python", "examples/keras_member.py", "--epochs", "30"],
              "predict_argv": ["/path/to/venv/bin/python", "examples/keras_member.py", "predict"]}
"""
import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

env = os.environ


def model_for(features, units, seed):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input(shape=(features,)),
                                 tf.keras.layers.Normalization(name="norm"),
                                 tf.keras.layers.Dense(units, activation="relu"),
                                 tf.keras.layers.Dense(units, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2), loss="mse")
    return model


def train(args):
    for gpu in tf.config.list_physical_devices("GPU"):  # only the slot's GPU is visible
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.threading.set_intra_op_parallelism_threads(int(env.get("ENSEMBLED_THREADS", "1")))
    tf.config.experimental.enable_op_determinism()
    x, y = np.load(env["ENSEMBLED_TRAIN_X"]), np.load(env["ENSEMBLED_TRAIN_Y"])
    vx, vy = np.load(env["ENSEMBLED_VAL_X"]), np.load(env["ENSEMBLED_VAL_Y"])
    model = model_for(x.shape[1], args.units, int(env["ENSEMBLED_SEED_INIT"]) % (2**31))
    model.get_layer("norm").adapt(x)
    stop = tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, restore_best_weights=True)
    fit = model.fit(x, y, validation_data=(vx, vy), epochs=args.epochs, batch_size=32, shuffle=True,
                    callbacks=[stop], verbose=0)
    out = env["ENSEMBLED_OUTPUT_DIR"]
    model.save(os.path.join(out, "model.keras"))
    for name, var in (("holdout_pred.npy", "ENSEMBLED_HOLDOUT_X"), ("pool_pred.npy", "ENSEMBLED_POOL_X")):
        np.save(os.path.join(out, name), model.predict(np.load(env[var]), verbose=0)[:, 0].astype(np.float32))
    hist = fit.history
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        for e in range(len(hist["loss"])):
            f.write(json.dumps({"epoch": e, "loss": hist["loss"][e], "val_loss": hist["val_loss"][e]}) + "\n")
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"best_val_loss": min(hist["val_loss"]), "tensorflow": tf.__version__}, f)
    print(f"{env['ENSEMBLED_MEMBER']}: {len(x)} rows, {len(hist['loss'])} epochs, best val_loss {min(hist['val_loss']):.4f}")


def predict():
    model = tf.keras.models.load_model(os.path.join(env["ENSEMBLED_MODEL_DIR"], "model.keras"))
    x = np.load(env["ENSEMBLED_PREDICT_X"])
    np.save(env["ENSEMBLED_PREDICT_OUTPUT"], model.predict(x, verbose=0)[:, 0].astype(np.float32))


if __name__ == "__main__":
    if sys.argv[1:2] == ["predict"]:
        predict()
    else:
        p = argparse.ArgumentParser()
        p.add_argument("--epochs", type=int, default=30)
        p.add_argument("--units", type=int, default=32)
        train(p.parse_args())
