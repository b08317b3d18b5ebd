"""Plots of a run with matplotlib, imported only when a plot is drawn: the package works
without it, and a plot then raises ImportError saying how to install it.

    plots.learning_curves(member_or_round_or_members)   loss and val_loss by epoch (history.jsonl)
    plots.reliability(round)                             calibration (calibration.py)
    plots.rounds(run)                                    member and ensemble error by round

Each draws on `ax` (default: a new figure's axes) and returns the axes; lines carry labels
(legend) and their data is the files' (a test can read it back from ax.lines).
"""
from .calibration import reliability as round_reliability


def pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("ensembled's plots need matplotlib: pip install 'ensembled[plot]' (or pip install matplotlib)") from e
    return plt


def _axes(ax):
    if ax is not None:
        return ax
    _, ax = pyplot().subplots()
    return ax


def learning_curves(members, keys=("loss", "val_loss"), ax=None):
    """`members`: a Member, a Round (all its members) or a list of Members; a line a member and key."""
    plt = pyplot()
    if hasattr(members, "members"):
        members = members.members
    elif not isinstance(members, (list, tuple)):
        members = [members]
    ax = _axes(ax)
    styles = {k: s for k, s in zip(keys, ("-", "--", ":", "-."))}
    for i, m in enumerate(members):
        h = m.history
        color = plt.rcParams["axes.prop_cycle"].by_key()["color"][i % 10]
        for k in keys:
            if k in h:
                ax.plot(h["epoch"], h[k], styles.get(k, "-"), color=color, label="%s %s" % (m.name, k))
    ax.set_xlabel("epoch")
    ax.set_ylabel(" / ".join(keys))
    ax.set_title("round %d: learning curves" % members[0].round if members else "learning curves")
    ax.legend(fontsize="small")
    return ax


def reliability(round_, ax=None):
    """Regression: observed coverage of the central intervals against their nominal level, raw
    and calibrated sigma; classification: accuracy against confidence per bin. The diagonal
    is perfect calibration."""
    rel = round_reliability(round_)
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], ":", color="gray", label="calibrated perfectly")
    if rel.kind == "intervals":
        ax.plot(rel.nominal, rel.raw, "o-", label="raw sigma (ICE %.3f)" % rel.ice)
        ax.plot(rel.nominal, rel.calibrated, "s-", label="calibrated sigma (ICE %.3f)" % rel.calibrated_ice)
        ax.set_xlabel("nominal coverage of the central interval")
        ax.set_ylabel("observed coverage on the holdout")
    else:
        filled = rel.count > 0
        ax.plot(rel.confidence[filled], rel.accuracy[filled], "o-", label="ensemble (ECE %.3f)" % rel.ece)
        ax.set_xlabel("confidence (highest mean probability)")
        ax.set_ylabel("accuracy on the holdout")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title("round %d: reliability" % round_.number)
    ax.legend(fontsize="small")
    return ax


def rounds(run, ax=None):
    """The members' mean error (with their std) and the ensemble's, by committed round."""
    t = run.table()
    ax = _axes(ax)
    metric = t["metric"][-1] if len(t) else "rmse"
    ax.errorbar(t["round"], t["member_mean"], yerr=t["member_std"], fmt="o-", capsize=3, label="members (mean ± std)")
    ax.plot(t["round"], t["ensemble"], "s-", label="ensemble")
    ax.set_xlabel("round")
    ax.set_ylabel("holdout " + ("accuracy" if metric == "accuracy" else "RMSE"))
    ax.legend(fontsize="small")
    return ax
