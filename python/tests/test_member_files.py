"""ensembled.member_files, and examples/member_files.py (the benches' and C++ tests' import)
that re-exports it: a member's files in either layout, with nothing but the standard library."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import ensembled
from conftest import SOURCE
from ensembled import member_files

EXAMPLE = os.path.join(SOURCE, "examples", "member_files.py")


def example(*args):
    """examples/member_files.py ARGS on an interpreter where numpy cannot be imported."""
    code = "import runpy, sys; sys.modules['numpy'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code, EXAMPLE] + [str(a) for a in args], capture_output=True,
                          timeout=60)


@pytest.mark.parametrize("layout", ["members_run", "packs_run"])
def test_the_example_writes_a_members_file(layout, request):
    state = request.getfixturevalue(layout)
    round_dir = os.path.join(state, "rounds", "r0001")
    m = ensembled.open_run(state).round(1).member("m001")
    for name in ("weights.bin", "holdout_pred.f32", "history.jsonl", "metrics.json"):
        out = example(round_dir, "m001", name)
        assert out.returncode == 0, out.stderr
        assert out.stdout == m.file_bytes(name) == member_files.member_bytes(round_dir, "m001", name)
    assert json.loads(example(round_dir, "m001", "member.json").stdout) == m.record
    missing = example(round_dir, "m009", "weights.bin")
    assert missing.returncode == 1 and b"members/m009: no directory, and no pack of the round holds it" in missing.stderr


def test_the_example_imports_the_packages_functions(packs_run):
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    try:
        import member_files as mf
    finally:
        sys.path.remove(os.path.dirname(EXAMPLE))
    assert mf.member_bytes is member_files.member_bytes and mf.round_members is member_files.round_members
    round_dir = os.path.join(packs_run, "rounds", "r0000")
    assert mf.round_members(round_dir) == ["m000", "m001"]
    assert mf.member_json(round_dir, "m000", "metrics.json") == ensembled.open_run(packs_run).round(0).member("m000").metrics


def copy_round(packs_run, tmp_path):
    round_dir = tmp_path / "r0000"
    shutil.copytree(os.path.join(packs_run, "rounds", "r0000"), round_dir)
    (pack,) = [p for p in (round_dir / "packs").iterdir() if p.is_dir()]
    return str(round_dir), pack


def test_a_member_published_twice_is_read_from_its_latest_pack(packs_run, tmp_path):
    round_dir, pack = copy_round(packs_run, tmp_path)
    before = member_files.member_bytes(round_dir, "m000", "holdout_pred.f32")
    later = pack.parent / (pack.name + "-later")
    shutil.copytree(pack, later)
    records = [json.loads(line) for line in (later / "members.jsonl").read_text().splitlines()]
    for r in records:
        r["published_ns"] += 1
    (later / "members.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (later / "holdout_pred.f32").write_bytes(b"\0" * (later / "holdout_pred.f32").stat().st_size)
    assert member_files.member_pack(round_dir, "m000")[0] == str(later)
    assert member_files.member_bytes(round_dir, "m000", "holdout_pred.f32") == b"\0" * len(before)
    (pack / "members.jsonl").write_text("".join(json.dumps(dict(r, published_ns=r["published_ns"] + 1)) + "\n"
                                                for r in records))
    assert member_files.member_pack(round_dir, "m000")[0] == str(pack)  # newer again
    assert member_files.member_bytes(round_dir, "m000", "holdout_pred.f32") == before


def test_a_pack_that_is_not_one_is_named(packs_run, tmp_path):
    round_dir, pack = copy_round(packs_run, tmp_path)
    lines = (pack / "members.jsonl").read_text().splitlines(True)
    (pack / "members.jsonl").write_text(lines[0] + '{"member": "m001"}\n')
    with pytest.raises(ensembled.CorruptState, match=r"members\.jsonl:2: not a member record \(member, record, metrics, files\)"):
        member_files.round_members(round_dir)
    with pytest.raises(FileNotFoundError, match=r"members/m001: no directory, .*; unreadable pack: .*members\.jsonl:2"):
        member_files.member_bytes(round_dir, "m001", "weights.bin")
    (pack / "members.jsonl").write_text("".join(lines)[:-1])  # its last line torn
    with pytest.raises(ensembled.CorruptState, match=r"members\.jsonl:2: the last line has no newline \(torn\)"):
        member_files.round_members(round_dir)
