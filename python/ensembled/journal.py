"""A run's journal (state_dir/journal.jsonl) read back as ensembled reads it (common/state/journal.cpp).

read_journal(path) -> the records, in order: a line that is not a JSON object with a string
"event" is CorruptState naming PATH:LINE, except the file's last line, which is a torn tail
from a crash mid-append and is dropped, as is a last line without its newline (ensembled
truncates it on resume). replay(records) -> RunProgress: what RunProgress::Apply makes of them
(the committed rounds, the current round's finished and failed members, finished or not, what
retention left of each committed round). Pure functions over the file's text; the records are
plain dicts.
"""
import json

from .errors import CorruptState

# What retention leaves of a committed round (common/state/retention.h RoundFiles), least first.
ROUND_FILES = ("all", "train_state", "records")


def read_journal(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    records = []
    pos, line_no = 0, 0
    while pos < len(text):
        line_no += 1
        nl = text.find("\n", pos)
        last = nl < 0
        line = text[pos:] if last else text[pos:nl]
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        good = isinstance(record, dict) and isinstance(record.get("event"), str)
        if not good or last:
            if last or nl + 1 == len(text):
                return records  # torn tail
            raise CorruptState("%s:%d: not a journal record" % (path, line_no))
        records.append(record)
        pos = nl + 1
    return records


class RunProgress:
    """Where a run stands after its records (common/state/journal.h RunProgress, the parts a reader uses).

    committed      the round_committed records in round order, with a later mutation_applied
                   folded in (its excluded_file; mutation_skipped false)
    next_round     the round being trained (= len(committed))
    done, failed   the current round's member_done / member_failed records by member name
    finished, finish_reason, config_epoch
    round_files    per committed round: "all", "train_state" or "records" (retention)
    """

    def __init__(self):
        self.committed = []
        self.next_round = 0
        self.done, self.failed = {}, {}
        self.finished, self.finish_reason = False, ""
        self.config_epoch = 0
        self.round_files = []

    def apply(self, r):
        ev = r.get("event")
        rnd = r.get("round", -1)
        if ev == "member_done" and rnd == self.next_round:
            self.failed.pop(r.get("member"), None)
            self.done[r.get("member")] = r
        elif ev == "member_failed" and rnd == self.next_round:
            self.failed[r.get("member")] = r
        elif ev == "round_committed" and rnd == self.next_round:
            self.committed.append(dict(r))
            self.next_round += 1
            self.done, self.failed = {}, {}
            self.round_files.append("all")
        elif ev == "mutation_applied" and self.committed and rnd == self.committed[-1]["round"]:
            self.committed[-1]["excluded_file"] = r.get("excluded_file", "")
            self.committed[-1]["mutation_skipped"] = False
        elif ev == "run_finished":
            self.finished, self.finish_reason = True, r.get("reason", "")
        elif ev == "run_extended":
            self.finished, self.finish_reason = False, ""
            if self.committed:
                self.committed[-1]["mutation_skipped"] = True
        elif ev == "round_pruned" and r.get("files") in ROUND_FILES and isinstance(rnd, int) \
                and 0 <= rnd < len(self.round_files):
            now = self.round_files[rnd]
            self.round_files[rnd] = max(now, r["files"], key=ROUND_FILES.index)
        elif ev == "config_changed" and "epoch" in r:
            self.config_epoch = r["epoch"]


def replay(records):
    progress = RunProgress()
    for r in records:
        progress.apply(r)
    return progress
