"""A mutation command written with ensembled.mutation, driving a real run; and the checks it
makes before printing, in the daemon's words."""
import io
import json
import os
import sys

import numpy as np
import pytest

import ensembled
from conftest import binary, package_env, run_ensembled, tiny_config
from ensembled import mutation

# The whole command: the 4 unused pool rows the members disagree on most, one row of its own,
# and what it saw written next to it for the test to check.
PICK = '''
import json, os, sys
import numpy as np
from ensembled import mutation

def pick(r):
    spread = r.pool_predictions().std(axis=0)
    free = r.pool_unused_ids
    take = free[np.argsort(-spread[free], kind="stable")[:4]]
    print("picked", take)                    # print() goes to stderr, not into the answer
    with r.predictor(raw_sigma=True) as p:   # this round's ensemble on rows of its own
        mean = p(r.pool_x[:3])["mean"]
    with open(os.environ["PICK_LOG"], "a") as f:
        f.write(json.dumps({"round": r.round, "take": take.tolist(), "members": r.member_names,
                            "train_rows": len(r.train_row_ids), "pool_unused": len(free),
                            "holdout_pred": r.holdout_predictions().tolist(), "mean": mean.tolist()}) + "\\n")
    return {"take": take, "add": (r.holdout_x[:1] * 0 + 0.5, np.array([1.25]))}

mutation.run(pick)
'''


def test_a_mutation_command_drives_a_run(binaries, runs_dir):
    script = runs_dir / "pick.py"
    script.write_text(PICK)
    log = runs_dir / "pick.jsonl"
    cfg = tiny_config("mutated", runs_dir / "mutated", rounds=3, pack_size=2,
                      extra={"mutation": {"policy": "command", "argv": [sys.executable, str(script)]}})
    env = package_env()
    env["PICK_LOG"] = str(log)
    state = run_ensembled(runs_dir, cfg, env=env)
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s["round"] for s in seen] == [0, 1]  # after each round but the last
    run = ensembled.open_run(state)
    committed = [r.record for r in run.rounds]
    unused = set(range(60))
    for s, r in zip(seen, run.rounds):
        assert committed[r.number]["pool_used"] == s["take"]
        # what the command read of the round (packed members: spans of the pack's file) is the package's
        assert s["members"] == r.member_names and r.members[0].pack is not None
        assert np.array_equal(np.array(s["holdout_pred"], dtype=np.float32), r.holdout_predictions())
        spread = r.pool_predictions().std(axis=0)
        free = np.array(sorted(unused))
        assert s["take"] == free[np.argsort(-spread[free], kind="stable")[:4]].tolist()
        assert s["pool_unused"] == len(unused) and s["train_rows"] == r.trained_rows
        assert np.array_equal(np.array(s["mean"], dtype=np.float32),
                              run.predict(run.pool().x[:3], round=r.number, raw_sigma=True, ensemblectl=binary("ensemblectl"))["mean"])
        unused -= set(s["take"])
    assert [r.trained_rows for r in run.rounds] == [120, 125, 130]  # 4 taken and 1 added a round
    train = run.train()
    assert train.x.shape == (130, 10)
    added = train.x[124]
    assert np.array_equal(added, np.full(10, 0.5, dtype=np.float32)) and train.y[124] == np.float32(1.25)


class Round:
    """What normalise needs of a MutationRound."""

    def __init__(self, features=3, targets=1, classes=None):
        self.features, self.targets, self.classes = features, targets, classes


def test_decisions_become_the_policys_json():
    r = Round()
    out = mutation.normalise({"add": (np.ones((2, 3)), np.array([4.0, 5.0])), "take": np.array([3, 1]),
                              "drop": [7]}, r)
    assert out == {"add": [[1.0, 1.0, 1.0, 4.0], [1.0, 1.0, 1.0, 5.0]], "take": [3, 1], "drop": [7]}
    assert mutation.normalise(None, r) == {}
    two = mutation.normalise({"add": np.arange(10.0).reshape(2, 5)}, Round(targets=2))
    assert two == {"add": [[0.0, 1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0]]}
    labels = mutation.normalise({"add": (np.zeros((2, 3)), ["hi", 2])}, Round(classes=["hi", "lo", "mid"]))
    assert labels == {"add": [[0.0, 0.0, 0.0, "hi"], [0.0, 0.0, 0.0, 2]]}


@pytest.mark.parametrize("decision, message", [
    ({"keep": [1]}, "/keep: unknown key"),
    ({"add": [[1, 2, 3]]}, "/add/0: must be an array of 4 numbers (features then target)"),
    ({"add": [[1, 2, float("nan"), 4]]}, "/add/0/2: not a finite float32 number"),
    ({"add": [[1, 2, 3, 1e39]]}, "/add/0/3: not a finite float32 number"),
    ({"take": [2, -1]}, "/take/1: -1 is not a row id"),
    ({"drop": [1.5]}, "/drop/0: 1.5 is not a row id"),
])
def test_a_decision_the_policy_would_refuse_is_not_printed(decision, message):
    summary = {"round": 0, "run": {"round": 0, "features": 3, "targets": 1, "members": []}}
    out = io.StringIO()
    with pytest.raises(ensembled.MutationOutputError) as e:
        mutation.run(lambda r: decision, stdin=io.StringIO(json.dumps(summary)), stdout=out)
    assert str(e.value) == message and out.getvalue() == ""


def test_a_class_label_must_be_a_string_or_an_integer():
    with pytest.raises(ensembled.MutationOutputError, match=r"^/add/0/3: a class label must be a string or an integer$"):
        mutation.normalise({"add": [[0, 0, 0, 0.5]]}, Round(classes=["a", "b"]))
