// PackResults: a fused pack's results as a handful of files, not a directory of six files a
// member (issue 52; config results_layout "packs", the default).
//
//   rounds/rNNNN/packs/<first task>-a<attempt>/     one per published pack attempt
//     members.jsonl      the pack's records: a line a published member, in the order its bytes
//                        lie in the files below:
//                          {"member": name, "published_ns": wall-clock ns of the pack's publication,
//                           "record": what member.json holds, "metrics": what metrics.json holds,
//                           "files": {"<member file name>": [offset, length], ...}}
//     weights.bin  history.jsonl  holdout_pred.f32  pool_pred.f32  [train_state.pt]
//                        each member file's bytes (MemberFiles names, run_layout.h), member after
//                        member: a member's weights.bin is the pack's weights.bin at its span
//   A member's files read back exactly as its own directory would hold them: member.json is
//   "record" dumped with an indent of 2 and a newline, metrics.json "metrics" likewise, every
//   other file its span (member_view.h serves them by their member-directory path).
//
// Durability is the member directory's: the writer fills <dir>.tmp unsynced, the worker's one
// syncfs makes it durable, one rename puts it in place (PackResultsWriter::Publish). A pack
// directory that exists is complete. A member published twice (its pack published, the
// supervisor gone before journaling it, the member trained again in another pack) is served
// from its latest publication: same bits (a member's bits do not depend on its pack), other
// timings.
// Not thread-safe (a writer belongs to one pack); the reader functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

inline constexpr char kPackRecordsFile[] = "members.jsonl";

// Where a member file's bytes lie inside its pack directory (the file of the same name).
struct PackSpan {
  uint64_t offset = 0, length = 0;
};

// One member's line of members.jsonl, as the index keeps it (records parsed on demand).
struct PackedMember {
  std::string name;
  std::string pack_dir;      // absolute or as given
  int64_t published_ns = 0;
  uint64_t line_offset = 0, line_length = 0;  // its line in members.jsonl
  std::map<std::string, PackSpan> files;      // member file name -> span
};

// Reads a pack directory's members.jsonl. A line that is not a member record is Corruption
// naming path:line; a span past the end of its file is Corruption naming both. A line's
// "record" is skipped, not parsed (PackedObject reads it, and says when it is not an object). `metrics`, when
// given, gets each returned member's metrics object (the same order), parsed with its line.
StatusOr<std::vector<PackedMember>> ReadPackRecords(const std::string& pack_dir,
                                                    std::vector<nlohmann::json>* metrics = nullptr);
// The member's "record" or "metrics" object (what member.json / metrics.json hold), from its
// line: `line` is the bytes of members.jsonl at m's line_offset / line_length (Corruption when
// they no longer are m's line).
StatusOr<nlohmann::json> PackedObject(const PackedMember& m, std::string_view line, const std::string& key);

class PackResultsWriter {
 public:
  // Writes into `pack_dir` + ".tmp" (a leftover of a crashed attempt is removed first).
  explicit PackResultsWriter(std::string pack_dir) : dir_(std::move(pack_dir)) {}
  ~PackResultsWriter();
  PackResultsWriter(const PackResultsWriter&) = delete;
  PackResultsWriter& operator=(const PackResultsWriter&) = delete;

  Status Begin();
  // Appends member `name`'s files (member file name -> bytes) after the pack's earlier members.
  // A member added again (a pack split after running out of memory makes its outputs again)
  // is listed with its new spans; its old bytes stay, unlisted.
  Status AddFiles(const std::string& name, const std::vector<std::pair<std::string, std::string_view>>& files);
  // member.json's and metrics.json's content for a member added before.
  void SetRecord(const std::string& name, nlohmann::json record);
  void SetMetrics(const std::string& name, nlohmann::json metrics);
  // Drops a member (its outcome failed): its bytes stay in the files, unlisted.
  void Drop(const std::string& name);
  // Writes members.jsonl for every member with a record and metrics (in AddFiles order) and
  // closes the files; none is flushed. Then the caller's syncfs, then Publish. Called once: the
  // records move into the file's lines.
  Status Finish();
  // Renames <dir>.tmp to <dir> (replacing an older one of the same name) and fsyncs the parent.
  Status Publish();
  const std::string& dir() const { return dir_; }
  std::string tmp_dir() const { return dir_ + ".tmp"; }
  size_t members() const { return order_.size(); }

 private:
  struct Entry {
    std::map<std::string, PackSpan> files;
    nlohmann::json record, metrics;
    bool dropped = false;
  };
  Status Append(const std::string& file, std::string_view bytes, PackSpan* span);
  std::string dir_;
  std::map<std::string, int> fds_;           // pack file name -> open descriptor
  std::map<std::string, uint64_t> sizes_;    // bytes written so far
  std::map<std::string, Entry> entries_;
  std::vector<std::string> order_;
};

}  // namespace ens
