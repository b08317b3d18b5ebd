#!/usr/bin/env python3
"""A member's files, read the way ensembled's own readers find them (common/member_view.h),
whichever results_layout wrote them (docs/configuration.md): the member's own directory
rounds/rNNNN/members/<name>/, else its span of its pack's file of the same name, found through
the pack's members.jsonl (rounds/rNNNN/packs/<pack>/; its latest publication wins).

    import member_files as mf
    names = mf.round_members(state + "/rounds/r0001")
    pred = np.frombuffer(mf.member_bytes(state + "/rounds/r0001", "m003", "holdout_pred.f32"), "<f4")
    metrics = mf.member_json(state + "/rounds/r0001", "m003", "metrics.json")

As a command: member_files.py ROUND_DIR MEMBER FILE  writes the file's bytes to stdout.
"""
import glob, json, os, sys

_RECORD_KEYS = {"member.json": "record", "metrics.json": "metrics"}


def _pack_records(round_dir):
    for path in sorted(glob.glob(os.path.join(round_dir, "packs", "*", "members.jsonl"))):
        if os.path.dirname(path).endswith(".tmp"):
            continue  # a pack being written, not published
        with open(path) as f:
            for line in f:
                yield os.path.dirname(path), json.loads(line)


def round_members(round_dir):
    """The names of a round's published members: own directories and the packs' records."""
    own = os.path.join(round_dir, "members")
    names = set(os.listdir(own)) if os.path.isdir(own) else set()
    names.update(r["member"] for _, r in _pack_records(round_dir))
    return sorted(names)


def _packed(round_dir, member):
    found = [(r["published_ns"], pack, r) for pack, r in _pack_records(round_dir) if r["member"] == member]
    if not found:
        raise FileNotFoundError(f"{round_dir}/members/{member}: no directory, and no pack of the round holds it")
    _, pack, record = max(found, key=lambda t: (t[0], t[1]))
    return pack, record


def member_json(round_dir, member, name):
    """member.json or metrics.json, parsed."""
    own = os.path.join(round_dir, "members", member)
    if os.path.isdir(own):
        with open(os.path.join(own, name)) as f:
            return json.load(f)
    return _packed(round_dir, member)[1][_RECORD_KEYS[name]]


def member_bytes(round_dir, member, name):
    """A member file's bytes (weights.bin, history.jsonl, holdout_pred.f32, pool_pred.f32, ...)."""
    own = os.path.join(round_dir, "members", member)
    if os.path.isdir(own):
        with open(os.path.join(own, name), "rb") as f:
            return f.read()
    if name in _RECORD_KEYS:
        return (json.dumps(member_json(round_dir, member, name), indent=2) + "\n").encode()
    pack, record = _packed(round_dir, member)
    if name not in record["files"]:
        raise FileNotFoundError(f"{own}/{name}: member {member} of pack {pack} has none")
    offset, length = record["files"][name]
    with open(os.path.join(pack, name), "rb") as f:
        f.seek(offset)
        return f.read(length)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: member_files.py ROUND_DIR MEMBER FILE")
    sys.stdout.buffer.write(member_bytes(*sys.argv[1:]))
