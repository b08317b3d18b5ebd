"""A member's files, found the way ensembled's own readers find them (common/state/member_view.h),
whichever results_layout wrote them (docs/configuration.md): the member's own directory
rounds/rNNNN/members/<name>/ first, else its span of its pack's file of the same name, found
through the pack's members.jsonl (rounds/rNNNN/packs/<pack>/; a pack directory ending in .tmp
is being written and is skipped; a member published twice: its latest publication).

    names = round_members(state + "/rounds/r0001")
    pred = np.frombuffer(member_bytes(state + "/rounds/r0001", "m003", "holdout_pred.f32"), "<f4")
    metrics = member_json(state + "/rounds/r0001", "m003", "metrics.json")

A packed member's member.json and metrics.json are its record's "record" and "metrics"
objects (member_bytes gives them as ensembled dumps them: an indent of 2 and a newline).
Missing files are FileNotFoundError naming the member directory's path; a pack whose
members.jsonl has a line that is not a member record is CorruptState naming PATH:LINE for
round_members, and is passed over when finding a member (named if no pack holds it), as
ensembled's own index does. Pure Python (no numpy), so
examples/member_files.py and the benches import it on any interpreter. Stateless: every call
reads the files again.
"""
import glob
import json
import os

from .errors import CorruptState

# The member files a pack holds as records, not as spans of a file (pack_results.h).
RECORD_KEYS = {"member.json": "record", "metrics.json": "metrics"}


def _read_pack(pack):
    """A pack's records as ReadPackRecords reads them (pack_results.cpp): every line a member
    record (member, record, metrics, files) ending in a newline, or the whole pack is
    CorruptState naming PATH:LINE."""
    path = os.path.join(pack, "members.jsonl")
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1]:
        raise CorruptState("%s:%d: the last line has no newline (torn)" % (path, len(lines)))
    records = []
    for n, line in enumerate(lines[:-1], 1):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not (isinstance(record, dict) and isinstance(record.get("member"), str)
                and all(isinstance(record.get(k), dict) for k in ("record", "metrics", "files"))):
            raise CorruptState("%s:%d: not a member record (member, record, metrics, files)" % (path, n))
        records.append((n, record))
    return records


def _packs(round_dir):
    """The round's published pack directories (one ending in .tmp is being written), sorted."""
    found = glob.glob(os.path.join(glob.escape(round_dir), "packs", "*", ""))
    return sorted(p.rstrip("/") for p in found if not p.rstrip("/").endswith(".tmp"))


def round_members(round_dir):
    """The names of a round's published members, sorted: own directories and the packs'
    records. A pack that cannot be read is CorruptState (its members would be missing)."""
    own = os.path.join(round_dir, "members")
    names = {n for n in os.listdir(own) if not n.endswith(".tmp")} if os.path.isdir(own) else set()
    for pack in _packs(round_dir):
        names.update(r["member"] for _, r in _read_pack(pack))
    return sorted(names)


def member_pack(round_dir, member):
    """(pack directory, its record of the member) for a member without its own directory;
    None when the member has its directory. Its latest publication wins (equal stamps: the
    later pack directory name); a pack that cannot be read is passed over, as ensembled's
    index passes it over, and named when no other pack holds the member."""
    if os.path.isdir(os.path.join(round_dir, "members", member)):
        return None
    found, unreadable = [], []
    for pack in _packs(round_dir):
        try:
            records = _read_pack(pack)
        except (CorruptState, OSError) as e:
            unreadable.append(str(e))
            continue
        found += [(r.get("published_ns", 0), pack, n, r) for n, r in records if r["member"] == member]
    if not found:
        raise FileNotFoundError("%s/members/%s: no directory, and no pack of the round holds it%s"
                                % (round_dir, member, "".join("; unreadable pack: " + u for u in unreadable)))
    _, pack, _, record = max(found, key=lambda t: t[:3])
    return pack, record


def member_json(round_dir, member, name):
    """member.json or metrics.json, parsed."""
    packed = member_pack(round_dir, member)
    if packed is None:
        with open(os.path.join(round_dir, "members", member, name)) as f:
            return json.load(f)
    if name not in RECORD_KEYS:
        raise ValueError("%s: not member.json or metrics.json" % name)
    return packed[1][RECORD_KEYS[name]]


def member_span(round_dir, member, name, packed=False):
    """(file, offset, length) where a member file's bytes lie; length None: the whole file.
    `packed`: member_pack's answer when the caller has it already."""
    if packed is False:
        packed = member_pack(round_dir, member)
    own = os.path.join(round_dir, "members", member, name)
    if packed is None:
        return own, 0, None
    pack, record = packed
    if name in RECORD_KEYS:
        raise ValueError("%s: a packed member's %s is a record, not a span" % (own, name))
    if name not in record.get("files", {}):
        raise FileNotFoundError("%s: member %s of pack %s has none" % (own, member, pack))
    offset, length = record["files"][name]
    return os.path.join(pack, name), offset, length


def read_span(path, offset, length):
    """The bytes of `path` at [offset, offset + length); length None: the whole file."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read() if length is None else f.read(length)
    if length is not None and len(data) != length:
        raise CorruptState("%s: [%d, %d) is past the end of the file" % (path, offset, offset + length))
    return data


def member_bytes(round_dir, member, name):
    """A member file's bytes (weights.bin, history.jsonl, holdout_pred.f32, pool_pred.f32,
    member.json, ...)."""
    packed = member_pack(round_dir, member)
    if packed is not None and name in RECORD_KEYS:
        return (json.dumps(packed[1][RECORD_KEYS[name]], indent=2, ensure_ascii=False) + "\n").encode()
    return read_span(*member_span(round_dir, member, name, packed))
