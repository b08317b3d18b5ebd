#include "common/state/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <limits>
#include <sstream>
#include <type_traits>

#include "common/base/atomic_file.h"
#include "common/base/env.h"
#include "common/base/fault_injection.h"
#include "common/base/fd_io.h"

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
  if (fd_ >= 0) CurrentEnv().Close(fd_);
}

StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& path) {
  Env& env = CurrentEnv();
  int fd = env.Open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  std::unique_ptr<Journal> j(new Journal(path, fd));
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  size_t valid = 0;
  auto recs = ParseLines(*text, path, &valid, &j->torn_);
  if (!recs.ok()) return recs.status();
  j->records_ = std::move(*recs);
  j->size_ = valid;
  if (valid < text->size()) {
    if (env.Ftruncate(fd, valid) != 0 || env.Fsync(fd) != 0)
      return Status::FromErrno("truncate torn tail of " + path, errno);
  }
  return j;
}

Status Journal::Append(json record, json* written) {
  std::vector<json> one;
  one.push_back(std::move(record));
  Status s = Write(&one);
  if (s.ok() && written != nullptr) *written = std::move(one.front());
  return s;
}

Status Journal::AppendBatch(std::vector<json> batch) { return Write(&batch); }

Status Journal::Write(std::vector<json>* batch) {
  if (batch->empty()) return Status::Ok();
  for (const json& record : *batch)
    if (JournalWriteFailureRequested(record.value("event", "")))
      return Status::IOError("write " + path_ + ": injected failure (ENSEMBLED_TEST_FAIL_JOURNAL)");
  const int64_t now = WallSeconds();
  std::string line;
  for (json& record : *batch) {
    record["time"] = now;
    line += record.dump() + "\n";
  }
  Env& env = CurrentEnv();
  Status s = WriteFull(fd_, line.data(), line.size(), path_);
  if (s.ok() && env.Fdatasync(fd_) != 0) s = Status::FromErrno("fsync " + path_, errno);
  if (!s.ok()) {
    // Whatever part of the batch reached the file goes: left, it would be a torn line that
    // the next append turns into corruption in the middle (a full disk that frees up). A
    // failed cut leaves it for Open's torn-tail rule, as a crash here would.
    env.Ftruncate(fd_, size_);
    return s;
  }
  size_ += line.size();
  return Status::Ok();
}

StatusOr<std::vector<json>> ReadJournal(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  size_t valid = 0;
  int torn = 0;
  return ParseLines(*text, path, &valid, &torn);
}

json ToRecord(const RunStartedRecord& r) {
  return {{"event", r.kEvent}, {"config_fingerprint", r.config_fingerprint}, {"features", r.features},
          {"train_rows", r.train_rows}, {"holdout_rows", r.holdout_rows}, {"pool_rows", r.pool_rows}};
}

namespace {
// "time" of a record read back; a record not yet written has none (Append adds it).
json WithTime(json j, int64_t time) {
  if (time != 0) j["time"] = time;
  return j;
}
}  // namespace

json ToRecord(const MemberDoneRecord& r) {
  return WithTime({{"event", r.kEvent}, {"round", r.round}, {"member", r.member}, {"index", r.index},
                   {"attempt", r.attempt}, {"slot", r.slot}, {"pid", r.pid}, {"metrics", r.metrics}},
                  r.time);
}

json ToRecord(const MemberFailedRecord& r) {
  return WithTime({{"event", r.kEvent}, {"round", r.round}, {"member", r.member}, {"index", r.index},
                   {"attempt", r.attempt}, {"error", r.error}, {"permanent", r.permanent}},
                  r.time);
}

json ToRecord(const RoundCommittedRecord& r) {
  json j = {{"event", r.kEvent}, {"round", r.round}, {"trained_rows", r.trained_rows}, {"generation", r.generation},
            {"train_rows", r.train_rows}, {"dropped_rows", r.dropped_rows}, {"pool_used", r.pool_used},
            {"excluded_file", r.excluded_file}, {"summary", r.summary}, {"wall_seconds", r.wall_seconds}};
  if (r.mutation_skipped) j["mutation_skipped"] = true;  // absent otherwise, as before the key existed
  return WithTime(std::move(j), r.time);
}

json ToRecord(const MutationAppliedRecord& r) {
  return {{"event", r.kEvent}, {"round", r.round}, {"generation", r.generation}, {"train_rows", r.train_rows},
          {"dropped_rows", r.dropped_rows}, {"pool_used", r.pool_used}, {"excluded_file", r.excluded_file},
          {"added", r.added}, {"dropped", r.dropped}};
}

json ToRecord(const ConfigChangedRecord& r) {
  return {{"event", r.kEvent}, {"epoch", r.epoch}, {"from_round", r.from_round}, {"fingerprint", r.fingerprint},
          {"changes", r.changes}};
}

json ToRecord(const RunExtendedRecord& r) {
  return {{"event", r.kEvent}, {"from_rounds", r.from_rounds}, {"to_rounds", r.to_rounds}};
}

json ToRecord(const RunFinishedRecord& r) {
  return {{"event", r.kEvent}, {"rounds", r.rounds}, {"reason", r.reason}};
}

json ToRecord(const RoundPrunedRecord& r) {
  return {{"event", r.kEvent}, {"round", r.round}, {"files", Name(r.files)}};
}

namespace {

std::vector<uint64_t> Ids(const json& j, const char* key) {
  std::vector<uint64_t> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& id : j[key])
      if (id.is_number_unsigned() || (id.is_number_integer() && id.get<int64_t>() >= 0)) out.push_back(id.get<uint64_t>());
  return out;
}

// A field a record of an earlier or damaged journal may lack or spell otherwise: the
// fallback, never an exception (json's value() throws on a key of another type, and a
// journal is the user's file).
template <typename T>
T NumberOr(const json& j, const char* key, T fallback) {
  auto v = j.find(key);
  if (v == j.end() || !v->is_number()) return fallback;
  if constexpr (std::is_integral_v<T>) {
    // Outside T's range, the fallback: converting such a double is undefined behaviour, and a
    // negative count would wrap to a huge one.
    using Limits = std::numeric_limits<T>;
    if (v->is_number_float()) {
      const double d = v->get<double>();
      const bool fits = d >= static_cast<double>(Limits::min()) && d < static_cast<double>(Limits::max()) + 1.0;
      return fits ? static_cast<T>(d) : fallback;
    }
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      return u <= static_cast<uint64_t>(Limits::max()) ? static_cast<T>(u) : fallback;
    }
    const int64_t i = v->get<int64_t>();
    if (i < 0) return Limits::is_signed && i >= static_cast<int64_t>(Limits::min()) ? static_cast<T>(i) : fallback;
    return static_cast<uint64_t>(i) <= static_cast<uint64_t>(Limits::max()) ? static_cast<T>(i) : fallback;
  } else {
    return v->get<T>();
  }
}
std::string StringOr(const json& j, const char* key) {
  auto v = j.find(key);
  return v != j.end() && v->is_string() ? v->get<std::string>() : std::string();
}
bool BoolOr(const json& j, const char* key, bool fallback) {
  auto v = j.find(key);
  return v != j.end() && v->is_boolean() ? v->get<bool>() : fallback;
}
json ObjectOr(const json& j, const char* key) {
  auto v = j.find(key);
  return v != j.end() && v->is_object() ? *v : json::object();
}

// The fields member_done and member_failed share: which attempt of which member, and when.
template <typename R>
R WithMemberAttempt(const json& j) {
  R r;
  r.round = NumberOr(j, "round", -1);
  r.member = StringOr(j, "member");
  r.index = NumberOr(j, "index", 0);
  r.attempt = NumberOr(j, "attempt", 0);
  r.time = NumberOr<int64_t>(j, "time", 0);
  return r;
}

// The fields round_committed and mutation_applied share: the round, and the generation its
// mutation published.
template <typename R>
R WithGeneration(const json& j) {
  R r;
  r.round = NumberOr(j, "round", -1);
  r.generation = NumberOr(j, "generation", uint64_t{0});
  r.train_rows = NumberOr(j, "train_rows", uint64_t{0});
  r.dropped_rows = NumberOr(j, "dropped_rows", uint64_t{0});
  r.pool_used = Ids(j, "pool_used");
  r.excluded_file = StringOr(j, "excluded_file");
  return r;
}

}  // namespace

MemberDoneRecord MemberDoneFrom(const json& j) {
  auto r = WithMemberAttempt<MemberDoneRecord>(j);
  r.slot = NumberOr(j, "slot", 0);
  r.pid = NumberOr<int64_t>(j, "pid", 0);
  r.metrics = ObjectOr(j, "metrics");
  return r;
}

MemberFailedRecord MemberFailedFrom(const json& j) {
  auto r = WithMemberAttempt<MemberFailedRecord>(j);
  r.error = StringOr(j, "error");
  r.permanent = BoolOr(j, "permanent", false);
  return r;
}

RoundCommittedRecord RoundCommittedFrom(const json& j) {
  auto r = WithGeneration<RoundCommittedRecord>(j);
  r.time = NumberOr<int64_t>(j, "time", 0);
  r.trained_rows = NumberOr(j, "trained_rows", uint64_t{0});
  r.summary = ObjectOr(j, "summary");
  r.wall_seconds = NumberOr(j, "wall_seconds", 0.0);
  r.mutation_skipped = BoolOr(j, "mutation_skipped", false);
  return r;
}

MutationAppliedRecord MutationAppliedFrom(const json& j) {
  auto r = WithGeneration<MutationAppliedRecord>(j);
  r.added = NumberOr(j, "added", uint64_t{0});
  r.dropped = NumberOr(j, "dropped", uint64_t{0});
  return r;
}

ConfigChangedRecord ConfigChangedFrom(const json& j) {
  ConfigChangedRecord r;
  r.epoch = NumberOr(j, "epoch", 0);
  r.from_round = NumberOr(j, "from_round", 0);
  r.fingerprint = StringOr(j, "fingerprint");
  if (j.contains("changes") && j["changes"].is_array())
    for (const auto& c : j["changes"])
      if (c.is_string()) r.changes.push_back(c.get<std::string>());
  return r;
}

bool RoundPrunedFrom(const json& j, RoundPrunedRecord* out) {
  const json round = j.value("round", json());
  if (!round.is_number_integer() || round.get<int64_t>() < 0 || round.get<int64_t>() > INT_MAX) return false;
  out->round = round.get<int>();
  return ParseRoundFiles(StringOr(j, "files"), &out->files);
}

void RunProgress::Apply(const json& r) {
  const std::string ev = StringOr(r, "event");
  const int round = NumberOr(r, "round", -1);
  if (ev == RunStartedRecord::kEvent) {
    started = true;
    train_rows = NumberOr(r, "train_rows", uint64_t{0});
  } else if (ev == MemberDoneRecord::kEvent && round == next_round) {
    MemberDoneRecord d = MemberDoneFrom(r);
    failed.erase(d.member);
    done[d.member] = std::move(d);
  } else if (ev == MemberFailedRecord::kEvent && round == next_round) {
    MemberFailedRecord f = MemberFailedFrom(r);
    failed[f.member] = std::move(f);
  } else if (ev == RoundCommittedRecord::kEvent && round == next_round) {
    committed.push_back(RoundCommittedFrom(r));
    const RoundCommittedRecord& c = committed.back();
    next_round += 1;
    generation = r.contains("generation") ? c.generation : generation + 1;
    if (r.contains("train_rows")) train_rows = c.train_rows;
    if (r.contains("dropped_rows")) dropped_rows = c.dropped_rows;
    pool_used.insert(pool_used.end(), c.pool_used.begin(), c.pool_used.end());
    done.clear();
    failed.clear();
    round_files.push_back(RoundFiles::kAll);
    pruned_since_commit.clear();
  } else if (ev == MutationAppliedRecord::kEvent && !committed.empty() && round == committed.back().round) {
    // The mutation a last round skipped, decided when the run was extended.
    const MutationAppliedRecord m = MutationAppliedFrom(r);
    generation = r.contains("generation") ? m.generation : generation + 1;
    if (r.contains("train_rows")) train_rows = m.train_rows;
    if (r.contains("dropped_rows")) dropped_rows = m.dropped_rows;
    pool_used.insert(pool_used.end(), m.pool_used.begin(), m.pool_used.end());
    committed.back().excluded_file = m.excluded_file;
    committed.back().mutation_skipped = false;
  } else if (ev == RunFinishedRecord::kEvent) {
    finished = true;
    finish_reason = StringOr(r, "reason");
  } else if (ev == RunExtendedRecord::kEvent) {
    finished = false;
    finish_reason.clear();
    // A run that finished with all rounds done skipped its last round's mutation.
    if (!committed.empty()) committed.back().mutation_skipped = true;
  } else if (RoundPrunedRecord p; ev == RoundPrunedRecord::kEvent && RoundPrunedFrom(r, &p) &&
                                   p.round < static_cast<int>(round_files.size())) {
    RoundFiles& now = round_files[static_cast<size_t>(p.round)];
    now = std::max(now, p.files);
    pruned_since_commit.push_back(p);
  } else if (ev == ConfigChangedRecord::kEvent) {
    config_epoch = r.contains("epoch") ? ConfigChangedFrom(r).epoch : config_epoch;
  }
}

RunProgress ReplayJournal(const std::vector<json>& records) {
  RunProgress p;
  for (const json& r : records) p.Apply(r);
  return p;
}

}  // namespace ens
