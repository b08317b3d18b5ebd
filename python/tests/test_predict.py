"""Predictions through `ensemblectl predict`: its numbers, as numpy arrays."""
import os

import numpy as np
import pytest

import ensembled
from conftest import binary, ctl


def cli_predict(state_dir, x, names, tmp_path, *args):
    """ensemblectl predict on a CSV of x: {column: its text values}."""
    path = tmp_path / "rows.csv"
    path.write_text(",".join(names) + "\n" + "".join(",".join("%.9g" % v for v in row) + "\n" for row in x.tolist()))
    out = ctl("predict", "--state-dir", state_dir, "--input", path, *args)
    assert out.returncode == 0, out.stderr
    lines = [line.split(",") for line in out.stdout.splitlines()]
    return {c: [row[i] for row in lines[1:]] for i, c in enumerate(lines[0])}


def test_regression_is_ensemblectls_and_the_members_mean(packs_run, tmp_path):
    run = ensembled.open_run(packs_run)
    x = run.holdout().x
    t = run.predict(x, ensemblectl=binary("ensemblectl"))
    assert t.columns == ["mean", "std"] and t["mean"].dtype == np.float32 and len(t) == 60
    cli = cli_predict(packs_run, x, run.feature_names, tmp_path)
    assert np.array_equal(t["mean"], np.array(cli["mean"], dtype=np.float32))
    assert np.array_equal(t["std"], np.array(cli["std"], dtype=np.float32))
    preds = run.round().holdout_predictions().astype(np.float64)
    assert np.allclose(t["mean"], preds.mean(axis=0), rtol=1e-6)


def test_raw_sigma_is_the_members_spread(members_run):
    run = ensembled.open_run(members_run)
    x = run.pool().x
    t = run.predict(x, round=0, raw_sigma=True, ensemblectl=binary("ensemblectl"))
    preds = run.round(0).pool_predictions().astype(np.float64)
    assert np.allclose(t["mean"], preds.mean(axis=0), rtol=1e-6)
    assert np.allclose(t["std"], preds.std(axis=0), rtol=1e-5, atol=1e-6)


def test_a_predictor_answers_batch_after_batch(members_run):
    run = ensembled.open_run(members_run)
    x = run.pool().x
    whole = run.predict(x, ensemblectl=binary("ensemblectl"))
    with ensembled.Predictor(members_run, ensemblectl=binary("ensemblectl")) as p:
        first, second = p(x[:25]), p(x[25:])
    assert np.array_equal(np.concatenate([first["mean"], second["mean"]]), whole["mean"])
    assert np.array_equal(np.concatenate([first["std"], second["std"]]), whole["std"])


def test_rows_by_column_name(members_run):
    run = ensembled.open_run(members_run)
    x = run.holdout().x[:5]
    by_position = run.predict(x, ensemblectl=binary("ensemblectl"))
    columns = {n: x[:, i] for i, n in reversed(list(enumerate(run.feature_names)))}
    assert np.array_equal(run.predict(columns, ensemblectl=binary("ensemblectl"))["mean"], by_position["mean"])
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(columns)
    assert np.array_equal(run.predict(frame, ensemblectl=binary("ensemblectl"))["std"], by_position["std"])
    with pytest.raises(ValueError, match=r"the rows have no column x1 \(the run's features: x0, x1,"):
        run.predict({"x0": [1.0]}, ensemblectl=binary("ensemblectl"))


def test_a_classifier_gives_labels_and_probabilities(classifier_run, tmp_path):
    run = ensembled.open_run(classifier_run)
    x = run.holdout().x
    t = ensembled.predict(classifier_run, x, raw_sigma=True, ensemblectl=binary("ensemblectl"))
    assert t.columns == ["class", "p_hi", "p_lo", "p_mid", "disagreement"]
    mean = run.round().holdout_predictions().astype(np.float64).mean(axis=0)
    assert list(t["class"]) == [run.classes[i] for i in mean.argmax(axis=1)]
    assert np.allclose(np.column_stack([t["p_hi"], t["p_lo"], t["p_mid"]]), mean, rtol=1e-6)
    cli = cli_predict(classifier_run, x, run.feature_names, tmp_path)  # calibrated (tempered) by default
    calibrated = run.predict(x, ensemblectl=binary("ensemblectl"))
    assert list(calibrated["class"]) == cli["class"]
    assert np.array_equal(calibrated["p_mid"], np.array(cli["p_mid"], dtype=np.float32))


def test_ensemblectls_failure_is_a_predict_error_with_its_words(members_run):
    with pytest.raises(ensembled.PredictError) as e:
        ensembled.predict(members_run, np.zeros((1, 10)), round=7, ensemblectl=binary("ensemblectl"))
    assert str(e.value) == "ensemblectl predict: round 7 is not committed (last: 1)"
    assert e.value.exit_code == 64
    with pytest.raises(ValueError, match=r"rows of 10 features expected"):
        ensembled.predict(members_run, np.zeros((1, 3)), ensemblectl=binary("ensemblectl"))


def test_ensemblectl_from_path_or_said_missing(members_run, monkeypatch):
    monkeypatch.delenv("ENSEMBLED_CTL", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(binary("ensemblectl")))
    assert len(ensembled.predict(members_run, np.zeros((3, 10)))) == 3
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ensembled.EnsembledError, match="ensemblectl is not on PATH"):
        ensembled.predict(members_run, np.zeros((3, 10)))


def test_an_exported_module_gives_ensemblectls_numbers(packs_run, tmp_path):
    pytest.importorskip("torch")
    ctl_path = binary("ensemblectl")
    run = ensembled.open_run(packs_run)
    x = run.holdout().x
    for raw in (False, True):
        path = ensembled.export(packs_run, tmp_path / ("e%d.pt" % raw), raw_sigma=raw, ensemblectl=ctl_path)
        mean, std = ensembled.load_exported(path)(x)
        t = run.predict(x, raw_sigma=raw, ensemblectl=ctl_path)
        assert mean.dtype == np.float32 and mean.shape == (60,)
        assert np.array_equal(mean, t["mean"])
        if raw:
            assert np.array_equal(std, t["std"])
        else:  # the module calibrates in float32, predict in double: the last bit may differ
            assert np.allclose(std, t["std"], rtol=1e-6, atol=0)
    m = run.round(0).member("m001")
    module = ensembled.load_exported(ensembled.export(packs_run, tmp_path / "m.pt", round=0, member="m001",
                                                      ensemblectl=ctl_path))
    assert np.array_equal(module(x).reshape(-1), m.holdout_pred)
    with pytest.raises(ensembled.PredictError) as e:
        ensembled.export(packs_run, tmp_path / "none.pt", round=9, ensemblectl=ctl_path)
    assert str(e.value).startswith("ensemblectl export: ") and "round 9" in str(e.value) and e.value.exit_code != 0
