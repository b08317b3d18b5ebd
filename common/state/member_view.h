// MemberView: a member's files by their member-directory paths, wherever they are stored.
//
// A member is named by its directory path, RunLayout::MemberDir(round, name) =
// <round dir>/members/<name>, and each of its files by <that>/<MemberFiles name>, whether or not
// that directory exists. A member trained alone, every member of a run with results_layout
// "members", and every member of a state written before 2026-12-06 has the directory. A member of
// a pack published with results_layout "packs" (the default) has none: its files are spans of its
// pack's files (pack_results.h), found under <round dir>/packs/. These functions serve a file from
// whichever holds it, the member's own directory first, so every reader (the supervisor, resume,
// verify, predict, export, retention, the mutation view, a warm start) takes the same paths for
// both layouts.
// A round's packs are indexed once per process and read again only when a member is not in the
// index, or the pack directory it names was replaced (one stat a lookup); the index holds each
// member's name and spans, not its records (read from the pack's members.jsonl when asked), and
// at most a few rounds. The pack files read lately are kept whole (at most 96 MiB, each file
// checked by one stat a read), so a reader going through a pack's members reads each file once.
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

// Whether the member has its directory or a pack holding it.
bool MemberExists(const std::string& member_dir);
// The pack directory that holds the member's files, or "" (it has its own directory, or none).
std::string MemberPackDir(const std::string& member_dir);
// The bytes the member file `path` holds (<member dir>/<file>): the file, or its span of its
// pack's file of the same name; member.json and metrics.json of a packed member are its record's
// objects, dumped as the worker dumps them. NotFound when neither holds it; a pack that cannot be
// read is Corruption or IOError naming its file.
StatusOr<std::string> ReadMemberFile(const std::string& path);
// member.json or metrics.json (`path` names which) parsed: a packed member's record object as
// it is, with no text in between; its metrics the first time are those parsed when its pack was
// indexed (the supervisor reads a pack's K metrics this way: each line parsed once). Corruption
// when the file is not JSON; InvalidArgument for another file name.
StatusOr<nlohmann::json> ReadMemberJson(const std::string& path);
bool MemberFileExists(const std::string& path);

// Where a member file's bytes lie: `file` at [offset, offset + length); whole: the file is the
// member's own (offset 0, every byte of it). Not for member.json and metrics.json of a packed
// member (they are records, not spans): InvalidArgument.
struct MemberFileSpan {
  std::string file;
  uint64_t offset = 0, length = 0;
  bool whole = true;
};
StatusOr<MemberFileSpan> LocateMemberFile(const std::string& path);

}  // namespace ens
