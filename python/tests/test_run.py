"""Reading a state directory: rounds, the summary table, members' files, in both layouts."""
import json
import os
import shutil
import sys

import numpy as np
import pytest

import ensembled
from conftest import ctl, run_ensembled, tiny_config


def journal_records(state_dir, event):
    with open(os.path.join(state_dir, "journal.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["event"] == event]


def status_table(state_dir):
    """The round table `ensemblectl status` prints (from its header line to the end)."""
    out = ctl("status", "--state-dir", state_dir)
    assert out.returncode == 0, out.stderr
    return out.stdout[out.stdout.index("round    train rows"):]


@pytest.mark.parametrize("layout", ["members_run", "packs_run"])
def test_rounds_are_the_journals_committed_records(layout, request):
    state = request.getfixturevalue(layout)
    run = ensembled.open_run(state)
    committed = journal_records(state, "round_committed")
    assert [r.number for r in run.rounds] == [0, 1]
    assert [r.record for r in run.rounds] == committed
    assert run.round().number == 1 and run.finished and run.finish_reason == "all rounds done"
    assert [r.trained_rows for r in run.rounds] == [120, 130]
    for r in run.rounds:
        with open(os.path.join(state, "rounds", "r%04d" % r.number, "summary.json")) as f:
            assert r.summary == json.load(f)
        assert r.ensemble == r.summary["ensemble"]


@pytest.mark.parametrize("layout", ["members_run", "packs_run", "classifier_run"])
def test_table_text_is_ensemblectl_status(layout, request):
    state = request.getfixturevalue(layout)
    assert ensembled.open_run(state).table_text() == status_table(state)


def test_table_holds_the_summaries_and_ensemblectl_status_json(members_run):
    run = ensembled.open_run(members_run)
    table = run.table()
    status = json.loads(ctl("status", "--state-dir", members_run, "--json").stdout)
    assert list(table["round"]) == [r["round"] for r in status["rounds"]]
    assert list(table["train_rows"]) == [r["trained_rows"] for r in status["rounds"]]
    for i, r in enumerate(status["rounds"]):
        s = r["summary"]
        assert table["member_mean"][i] == s["member_rmse_mean"] and table["member_std"][i] == s["member_rmse_std"]
        assert table["ensemble"][i] == s["ensemble_rmse"] and table["ensemble_error"][i] == s["ensemble_error"]
        assert table["coverage_2sigma"][i] == s["coverage_2sigma"]
        assert table["calibrated_nll"][i] == s["calibrated_gaussian_nll"]
        assert table["ice"][i] == s["interval_calibration_error"]
        assert np.isnan(table["ece"][i])  # a classifier's figure
        assert table["wall_seconds"][i] == r["wall_seconds"]
    frame = table.to_pandas()
    assert list(frame.columns) == table.columns and frame["ensemble"].tolist() == list(table["ensemble"])


def test_classifier_table_has_accuracy_and_ece(classifier_run):
    row = ensembled.open_run(classifier_run).table().rows()[0]
    summary = journal_records(classifier_run, "round_committed")[0]["summary"]
    assert row["metric"] == "accuracy" and row["ensemble"] == summary["ensemble_accuracy"]
    assert row["ece"] == summary["ensemble_ece"] and row["holdout_nll"] == summary["ensemble_nll"]
    assert np.isnan(row["coverage_1sigma"])


def test_members_files_in_their_own_directories(members_run):
    run = ensembled.open_run(members_run)
    for r in run.rounds:
        assert r.member_names == ["m000", "m001"]
        for m in r.members:
            own = os.path.join(members_run, "rounds", "r%04d" % r.number, "members", m.name)
            assert m.pack is None and m.dir == own
            assert np.array_equal(m.holdout_pred, np.fromfile(os.path.join(own, "holdout_pred.f32"), "<f4"))
            assert np.array_equal(m.pool_pred, np.fromfile(os.path.join(own, "pool_pred.f32"), "<f4"))
            with open(os.path.join(own, "metrics.json")) as f:
                assert m.metrics == json.load(f)
            with open(os.path.join(own, "member.json")) as f:
                assert m.record == json.load(f)
            with open(os.path.join(own, "history.jsonl")) as f:
                epochs = [json.loads(line) for line in f]
            assert list(m.history["epoch"]) == [1, 2]
            assert list(m.history["loss"]) == [e["loss"] for e in epochs]
            assert list(m.history["val_loss"]) == [e["val_loss"] for e in epochs]


def test_packed_members_are_spans_of_their_packs_files(packs_run):
    run = ensembled.open_run(packs_run)
    for r in run.rounds:
        (pack,) = [d for d in os.listdir(os.path.join(r.dir, "packs")) if not d.endswith(".json")]
        pack = os.path.join(r.dir, "packs", pack)
        with open(os.path.join(pack, "members.jsonl")) as f:
            records = {rec["member"]: rec for rec in map(json.loads, f)}
        assert r.member_names == sorted(records) == ["m000", "m001"]
        for m in r.members:
            rec = records[m.name]
            assert m.pack == pack and not os.path.exists(m.dir)
            offset, length = rec["files"]["holdout_pred.f32"]
            with open(os.path.join(pack, "holdout_pred.f32"), "rb") as f:
                f.seek(offset)
                assert m.holdout_pred.tobytes() == f.read(length)
            assert m.metrics == rec["metrics"] and m.record == rec["record"]
            assert json.loads(m.file_bytes("member.json")) == rec["record"]


def test_both_layouts_give_the_same_members(members_run, packs_run):
    """The same seeds packed or alone: the same bits (docs/reproducibility.md), read either way."""
    alone, packed = ensembled.open_run(members_run), ensembled.open_run(packs_run)
    for a, p in zip(alone.rounds, packed.rounds):
        for ma, mp in zip(a.members, p.members):
            for name in ("weights.bin", "holdout_pred.f32", "pool_pred.f32"):
                assert ma.file_bytes(name) == mp.file_bytes(name), (a.number, ma.name, name)
            for key in ("loss", "val_loss", "mae", "val_mae"):  # (its "seconds" are timings)
                assert np.array_equal(ma.history[key], mp.history[key])
            assert ma.metrics["holdout_rmse"] == mp.metrics["holdout_rmse"]


def test_member_table_is_the_summarys_members(members_run):
    r = ensembled.open_run(members_run).round(1)
    table = r.member_table()
    assert list(table["member"]) == ["m000", "m001"]
    assert [int(s) for s in table["seed"]] == [m["seed"] for m in r.summary["members"]]  # u64 seeds stay exact
    assert list(table["holdout_rmse"]) == [m["holdout_rmse"] for m in r.summary["members"]]


def test_ensemble_rmse_from_the_members_predictions(packs_run):
    run = ensembled.open_run(packs_run)
    holdout = run.holdout()
    assert holdout.x.shape == (60, 10) and holdout.y.shape == (60,)
    assert np.array_equal(holdout.x, np.load(os.path.join(packs_run, "data", "holdout_x.npy")))
    for r in run.rounds:
        preds = r.holdout_predictions()
        assert preds.shape == (2, 60) and r.pool_predictions().shape == (2, 60)
        mean = preds[0].astype(np.float64) + preds[1]
        mean /= 2
        rmse = float(np.sqrt(np.mean((mean - holdout.y) ** 2)))
        assert rmse == pytest.approx(r.ensemble["ensemble_rmse"], rel=1e-12)
        for m in r.members:
            assert float(np.sqrt(np.mean((m.holdout_pred.astype(np.float64) - holdout.y) ** 2))) == \
                pytest.approx(m.metrics["holdout_rmse"], rel=1e-6)


def test_weights_compute_the_members_predictions(packs_run):
    """weights.bin's tensors, applied as the member's module applies them, give its holdout predictions."""
    run = ensembled.open_run(packs_run)
    x = run.holdout().x.astype(np.float64)
    for m in run.round(1).members:
        w = m.weights
        assert list(w) == ["layer0_weight", "layer0_bias", "layer1_weight", "layer1_bias", "x_mean", "x_std",
                           "y_mean", "y_std"]
        assert w["layer0_weight"].shape == (8, 10) and w["layer1_weight"].shape == (1, 8)
        assert w.spec["layers"] == m.record["spec"]["layers"]
        h = np.maximum((x - w["x_mean"]) / w["x_std"] @ w["layer0_weight"].T + w["layer0_bias"], 0)
        y = (h @ w["layer1_weight"].T + w["layer1_bias"])[:, 0] * w["y_std"][0] + w["y_mean"][0]
        assert np.allclose(y, m.holdout_pred, rtol=1e-5, atol=1e-5)


def test_classifier_predictions_are_probabilities(classifier_run):
    run = ensembled.open_run(classifier_run)
    assert run.classes == ["hi", "lo", "mid"]
    r = run.round(0)
    preds = r.holdout_predictions()
    assert preds.shape == (3, 48, 3)
    assert np.allclose(preds.sum(axis=2), 1, atol=1e-5)
    labels = run.holdout().y.astype(int)
    accuracy = np.mean(preds.astype(np.float64).mean(axis=0).argmax(axis=1) == labels)
    assert accuracy == pytest.approx(r.ensemble["ensemble_accuracy"], rel=1e-12)


def test_reliability_is_the_summarys_or_ensembleds_ece(members_run, classifier_run):
    r = ensembled.open_run(members_run).round(1)
    rel = r.reliability()
    assert rel.kind == "intervals"
    assert list(rel.nominal) == r.ensemble["reliability"]["nominal"]
    assert list(rel.raw) == r.ensemble["reliability"]["raw"]
    assert list(rel.calibrated) == r.ensemble["reliability"]["calibrated"]
    c = ensembled.open_run(classifier_run).round(0)
    rel = c.reliability()
    assert rel.kind == "confidence" and rel.count.sum() == 48
    assert rel.ece == pytest.approx(c.ensemble["ensemble_ece"], abs=1e-15)


def test_one_member_regression_has_no_reliability(binaries, runs_dir):
    state = run_ensembled(runs_dir, tiny_config("one", runs_dir / "one", rounds=1, members=1))
    with pytest.raises(ensembled.EnsembledError, match="round 0 has no reliability curve"):
        ensembled.open_run(state).round(0).reliability()


def test_a_round_not_committed_is_named_as_ensemblectl_names_it(members_run):
    run = ensembled.open_run(members_run)
    with pytest.raises(ensembled.NotCommitted) as e:
        run.round(5)
    cli = ctl("predict", "--state-dir", members_run, "--input", "-", "--round", 5, input="")
    assert cli.stderr == "ensemblectl predict: %s\n" % e.value
    with pytest.raises(KeyError, match="round 1 has no member 'm009'"):
        run.round(1).member("m009")


def test_pruned_rounds_keep_their_records_only(binaries, runs_dir):
    state = run_ensembled(runs_dir, tiny_config("pruned", runs_dir / "pruned", rounds=3,
                                                extra={"retention": {"keep_rounds": 1}}))
    run = ensembled.open_run(state)
    assert [r.files for r in run.rounds] == ["records", "train_state", "all"]
    m = run.round(0).member("m000")
    assert m.metrics["round"] == 0 and len(m.history["loss"]) == 2
    with pytest.raises(FileNotFoundError):
        m.holdout_pred
    assert run.round(2).member("m000").holdout_pred.shape == (60,)


def test_journal_torn_tail_dropped_and_corruption_named(members_run, tmp_path):
    state = tmp_path / "copy"
    shutil.copytree(members_run, state)
    journal = state / "journal.jsonl"
    whole = ensembled.read_journal(str(journal))
    with open(journal, "a") as f:
        f.write('{"event": "member_done", "rou')  # a crash mid-append
    assert ensembled.read_journal(str(journal)) == whole
    assert len(ensembled.open_run(state).rounds) == 2
    lines = journal.read_text().splitlines(True)
    journal.write_text(lines[0] + "not json\n" + "".join(lines[1:]))
    with pytest.raises(ensembled.CorruptState, match="journal.jsonl:2: not a journal record"):
        ensembled.open_run(state)


def test_a_folder_without_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run.json"):
        ensembled.open_run(tmp_path)


def test_tables_without_pandas_say_how_to_get_it(members_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'ensembled\[pandas\]'"):
        ensembled.open_run(members_run).table().to_pandas()
