#include "common/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <sstream>

#include "common/atomic_file.h"
#include "common/fd_io.h"

namespace ens {
namespace {

using json = nlohmann::json;

// Parses journal text. `torn` receives the byte length of valid content when the last
// line is torn (no newline or unparsable), else text.size().
StatusOr<std::vector<json>> ParseLines(const std::string& text, const std::string& path,
                                       size_t* valid_bytes, int* torn) {
  std::vector<json> out;
  size_t pos = 0;
  int line_no = 0;
  *torn = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    bool last = (nl == std::string::npos);
    std::string line = text.substr(pos, last ? std::string::npos : nl - pos);
    json j = json::parse(line, nullptr, false);
    bool good = !j.is_discarded() && j.is_object() && j.contains("event") && j["event"].is_string();
    if (!good || last) {
      bool is_final = last || nl + 1 == text.size();
      if (is_final) {  // torn tail from a crash mid-append
        *torn = 1;
        *valid_bytes = pos;
        return out;
      }
      return Status::Corruption(path + ":" + std::to_string(line_no) + ": not a journal record");
    }
    out.push_back(std::move(j));
    pos = nl + 1;
  }
  *valid_bytes = text.size();
  return out;
}

}  // namespace

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  std::unique_ptr<Journal> j(new Journal(path, fd));
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  size_t valid = 0;
  auto recs = ParseLines(*text, path, &valid, &j->torn_);
  if (!recs.ok()) return recs.status();
  j->records_ = std::move(*recs);
  if (valid < text->size()) {
    if (::ftruncate(fd, static_cast<off_t>(valid)) != 0 || ::fsync(fd) != 0)
      return Status::FromErrno("truncate torn tail of " + path, errno);
  }
  return j;
}

Status Journal::Append(json record) {
  std::vector<json> one;
  one.push_back(std::move(record));
  return AppendBatch(std::move(one));
}

Status Journal::AppendBatch(std::vector<json> batch) {
  if (batch.empty()) return Status::Ok();
  const auto now = static_cast<int64_t>(std::time(nullptr));
  std::string line;
  for (json& record : batch) {
    record["time"] = now;
    line += record.dump() + "\n";
  }
  if (Status s = WriteFull(fd_, line.data(), line.size(), path_); !s.ok()) return s;
  if (::fdatasync(fd_) != 0) return Status::FromErrno("fsync " + path_, errno);
  for (json& record : batch) records_.push_back(std::move(record));
  return Status::Ok();
}

StatusOr<std::vector<json>> ReadJournal(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  size_t valid = 0;
  int torn = 0;
  return ParseLines(*text, path, &valid, &torn);
}

RunProgress ReplayJournal(const std::vector<json>& records) {
  RunProgress p;
  for (const json& r : records) {
    const std::string ev = r.value("event", "");
    if (ev == "run_started") {
      p.started = true;
      p.train_rows = r.value("train_rows", uint64_t{0});
    } else if (ev == "member_done" && r.value("round", -1) == p.next_round) {
      p.done[r.value("member", "")] = r;
      p.failed.erase(r.value("member", ""));
    } else if (ev == "member_failed" && r.value("round", -1) == p.next_round) {
      p.failed[r.value("member", "")] = r;
    } else if (ev == "round_committed" && r.value("round", -1) == p.next_round) {
      p.committed.push_back(r);
      p.next_round += 1;
      p.generation = r.value("generation", p.generation + 1);
      p.train_rows = r.value("train_rows", p.train_rows);
      p.dropped_rows = r.value("dropped_rows", p.dropped_rows);
      if (r.contains("pool_used") && r["pool_used"].is_array())
        for (const auto& id : r["pool_used"]) p.pool_used.push_back(id.get<uint64_t>());
      p.done.clear();
      p.failed.clear();
    } else if (ev == "mutation_applied" && !p.committed.empty() &&
               r.value("round", -1) == p.committed.back().value("round", -2)) {
      // The mutation a last round skipped, decided when the run was extended.
      p.generation = r.value("generation", p.generation + 1);
      p.train_rows = r.value("train_rows", p.train_rows);
      p.dropped_rows = r.value("dropped_rows", p.dropped_rows);
      if (r.contains("pool_used") && r["pool_used"].is_array())
        for (const auto& id : r["pool_used"]) p.pool_used.push_back(id.get<uint64_t>());
      p.committed.back()["excluded_file"] = r.value("excluded_file", "");
      p.committed.back()["mutation_skipped"] = false;
    } else if (ev == "run_finished") {
      p.finished = true;
      p.finish_reason = r.value("reason", "");
    } else if (ev == "run_extended") {
      p.finished = false;
      p.finish_reason.clear();
      // A run that finished with all rounds done skipped its last round's mutation.
      if (!p.committed.empty()) p.committed.back()["mutation_skipped"] = true;
    } else if (ev == "config_changed") {
      p.config_epoch = r.value("epoch", p.config_epoch);
    }
  }
  return p;
}

}  // namespace ens
