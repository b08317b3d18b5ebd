"""Plots draw the files' numbers; without matplotlib they say how to get it."""
import sys

import numpy as np
import pytest

import ensembled
from ensembled import plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    if sys.modules.get("matplotlib.pyplot"):
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture
def mpl():
    """matplotlib on the Agg backend (conftest sets MPLBACKEND), or the test is skipped."""
    return pytest.importorskip("matplotlib")


def test_learning_curves_are_the_members_history(mpl, packs_run, tmp_path):
    r = ensembled.open_run(packs_run).round(1)
    ax = plots.learning_curves(r)
    lines = {line.get_label(): line for line in ax.lines}
    assert sorted(lines) == ["m000 loss", "m000 val_loss", "m001 loss", "m001 val_loss"]
    for m in r.members:
        for key in ("loss", "val_loss"):
            assert list(lines["%s %s" % (m.name, key)].get_xdata()) == [1, 2]
            assert list(lines["%s %s" % (m.name, key)].get_ydata()) == list(m.history[key])
    assert ax.get_title() == "round 1: learning curves"
    assert mpl.get_backend().lower() == "agg"
    ax.figure.savefig(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_learning_curves_of_one_member_on_given_axes(mpl, members_run):
    import matplotlib.pyplot as plt
    _, ax = plt.subplots()
    m = ensembled.open_run(members_run).round(0).member("m001")
    assert plots.learning_curves(m, keys=("mae",), ax=ax) is ax
    (line,) = ax.lines
    assert line.get_label() == "m001 mae" and list(line.get_ydata()) == list(m.history["mae"])


def test_reliability_of_a_regression_is_its_summarys_curves(mpl, members_run, tmp_path):
    r = ensembled.open_run(members_run).round(1)
    ax = plots.reliability(r)
    diagonal, raw, calibrated = ax.lines
    curve = r.ensemble["reliability"]
    assert list(raw.get_xdata()) == curve["nominal"] and list(raw.get_ydata()) == curve["raw"]
    assert list(calibrated.get_ydata()) == curve["calibrated"]
    assert raw.get_label() == "raw sigma (ICE %.3f)" % r.ensemble["interval_calibration_error"]
    ax.figure.savefig(tmp_path / "reliability.pdf")
    assert (tmp_path / "reliability.pdf").read_bytes()[:5] == b"%PDF-"


def test_reliability_of_a_classifier_is_accuracy_by_confidence(mpl, classifier_run):
    r = ensembled.open_run(classifier_run).round(0)
    rel = r.reliability()
    ax = plots.reliability(r)
    _, curve = ax.lines
    filled = rel.count > 0
    assert np.array_equal(curve.get_xdata(), rel.confidence[filled])
    assert np.array_equal(curve.get_ydata(), rel.accuracy[filled])
    assert curve.get_label() == "ensemble (ECE %.3f)" % r.ensemble["ensemble_ece"]


def test_rounds_plot(mpl, members_run):
    run = ensembled.open_run(members_run)
    ax = plots.rounds(run)
    ensemble = [line for line in ax.lines if line.get_label() == "ensemble"][0]
    assert list(ensemble.get_ydata()) == list(run.table()["ensemble"])


def test_without_matplotlib_a_plot_says_how_to_get_it(members_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    run = ensembled.open_run(members_run)
    assert run.round(1).member("m000").history["loss"].shape == (2,)  # reading needs no matplotlib
    with pytest.raises(ImportError, match=r"ensembled's plots need matplotlib: pip install 'ensembled\[plot\]'"):
        plots.learning_curves(run.round(1))
