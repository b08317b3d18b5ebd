#include "common/state/pack_results.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "common/base/atomic_file.h"
#include "common/base/env.h"
#include "common/base/fd_io.h"

namespace ens {
namespace {

// A member file's name inside a pack directory: a plain name, never members.jsonl itself.
bool IsSpanFileName(const std::string& f) {
  return !f.empty() && f.find('/') == std::string::npos && f != "." && f != ".." && f != kPackRecordsFile;
}

std::string Where(const std::string& path, size_t line) { return path + ":" + std::to_string(line); }

}  // namespace

StatusOr<std::vector<PackedMember>> ReadPackRecords(const std::string& pack_dir, std::vector<nlohmann::json>* metrics) {
  const std::string path = pack_dir + "/" + kPackRecordsFile;
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<PackedMember> out;
  std::map<std::string, uint64_t> file_sizes;  // stat once a pack file
  size_t begin = 0, line = 0;
  while (begin < text->size()) {
    ++line;
    size_t end = text->find('\n', begin);
    if (end == std::string::npos) return Status::Corruption(Where(path, line) + ": the last line has no newline (torn)");
    // The index keeps a member's name, spans and metrics; its "record" (the spec and task,
    // most of the line) is parsed when someone reads member.json (PackedObject): skipped here,
    // not built, only its presence noted.
    bool has_record = false;
    auto skip_record = [&has_record](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (depth != 1 || event != nlohmann::json::parse_event_t::key || parsed != "record") return true;
      has_record = true;
      return false;
    };
    auto j = nlohmann::json::parse(text->begin() + static_cast<std::ptrdiff_t>(begin),
                                   text->begin() + static_cast<std::ptrdiff_t>(end), skip_record, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("member") || !j["member"].is_string() ||
        !j.contains("files") || !j["files"].is_object() || !has_record ||
        !j.contains("metrics") || !j["metrics"].is_object())
      return Status::Corruption(Where(path, line) + ": not a member record (member, record, metrics, files)");
    PackedMember m;
    m.name = j["member"].get<std::string>();
    m.pack_dir = pack_dir;
    m.published_ns = j.value("published_ns", int64_t{0});
    m.line_offset = begin;
    m.line_length = end + 1 - begin;
    for (const auto& [file, span] : j["files"].items()) {
      if (!IsSpanFileName(file) || !span.is_array() || span.size() != 2 || !span[0].is_number_unsigned() ||
          !span[1].is_number_unsigned())
        return Status::Corruption(Where(path, line) + ": member " + m.name + ": file \"" + file +
                                  "\" is not [offset, length]");
      PackSpan s{span[0].get<uint64_t>(), span[1].get<uint64_t>()};
      auto size = file_sizes.find(file);
      if (size == file_sizes.end()) {
        struct stat st {};
        // A file retention removed (predictions, weights) has no size to check against.
        uint64_t bytes = ::stat((pack_dir + "/" + file).c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : UINT64_MAX;
        size = file_sizes.emplace(file, bytes).first;
      }
      if (s.offset > size->second || s.length > size->second - s.offset)
        return Status::Corruption(Where(path, line) + ": member " + m.name + ": " + file + " [" +
                                  std::to_string(s.offset) + ", +" + std::to_string(s.length) + ") is past the end of " +
                                  pack_dir + "/" + file + " (" + std::to_string(size->second) + " bytes)");
      m.files[file] = s;
    }
    out.push_back(std::move(m));
    if (metrics != nullptr) metrics->push_back(std::move(j["metrics"]));
    begin = end + 1;
  }
  return out;
}

StatusOr<nlohmann::json> PackedObject(const PackedMember& m, std::string_view line, const std::string& key) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("member", "") != m.name || !j.contains(key) || !j[key].is_object())
    return Status::Corruption(m.pack_dir + "/" + kPackRecordsFile + ": the line of member " + m.name +
                              " has no \"" + key + "\" object (changed since it was read, or damaged)");
  return std::move(j[key]);
}

PackResultsWriter::~PackResultsWriter() {
  for (auto& [name, fd] : fds_) CurrentEnv().Close(fd);
}

Status PackResultsWriter::Begin() {
  Status st = RemoveTree(tmp_dir());
  if (st.ok()) st = MakeDirs(tmp_dir());
  return st;
}

Status PackResultsWriter::Append(const std::string& file, std::string_view bytes, PackSpan* span) {
  const std::string path = tmp_dir() + "/" + file;
  auto fd = fds_.find(file);
  if (fd == fds_.end()) {
    int f = CurrentEnv().Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f < 0) return Status::FromErrno("create " + path, errno);
    fd = fds_.emplace(file, f).first;
  }
  uint64_t& size = sizes_[file];
  if (Status s = WriteFull(fd->second, bytes.data(), bytes.size(), path); !s.ok()) return s;
  *span = {size, bytes.size()};
  size += bytes.size();
  return Status::Ok();
}

Status PackResultsWriter::AddFiles(const std::string& name,
                                   const std::vector<std::pair<std::string, std::string_view>>& files) {
  Entry e;
  for (const auto& [file, bytes] : files) {
    if (!IsSpanFileName(file))
      return Status::InvalidArgument("pack " + dir_ + ": member " + name + ": \"" + file + "\" is not a member file name");
    if (Status s = Append(file, bytes, &e.files[file]); !s.ok()) return s;
  }
  if (!entries_.count(name)) order_.push_back(name);
  entries_[name] = std::move(e);
  return Status::Ok();
}

void PackResultsWriter::SetRecord(const std::string& name, nlohmann::json record) {
  if (auto e = entries_.find(name); e != entries_.end()) e->second.record = std::move(record);
}

void PackResultsWriter::SetMetrics(const std::string& name, nlohmann::json metrics) {
  if (auto e = entries_.find(name); e != entries_.end()) e->second.metrics = std::move(metrics);
}

void PackResultsWriter::Drop(const std::string& name) {
  if (auto e = entries_.find(name); e != entries_.end()) e->second.dropped = true;
}

Status PackResultsWriter::Finish() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          CurrentEnv().WallNow().time_since_epoch()).count();
  std::string lines;
  for (const std::string& name : order_) {
    Entry& e = entries_.at(name);
    if (e.dropped || !e.record.is_object() || !e.metrics.is_object()) continue;
    nlohmann::json line = nlohmann::json::object();  // the records moved in, not copied: Finish is the last use
    line["member"] = name;
    line["published_ns"] = now;
    line["record"] = std::move(e.record);
    line["metrics"] = std::move(e.metrics);
    nlohmann::json& files = line["files"] = nlohmann::json::object();
    for (const auto& [file, span] : e.files) files[file] = {span.offset, span.length};
    lines += line.dump() + "\n";
  }
  Status st = Status::Ok();
  for (auto& [file, fd] : fds_)
    if (CurrentEnv().Close(fd) != 0 && st.ok()) st = Status::FromErrno("close " + tmp_dir() + "/" + file, errno);
  fds_.clear();
  if (!st.ok()) return st;
  return WriteFileUnsynced(tmp_dir() + "/" + kPackRecordsFile, lines);
}

Status PackResultsWriter::Publish() {
  Status st = SwapDirInto(tmp_dir(), dir_);
  return st.ok() ? FsyncDir(ParentDir(dir_)) : st;
}

}  // namespace ens
