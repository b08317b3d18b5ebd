#include "common/state/member_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "common/base/atomic_file.h"
#include "common/base/fd_io.h"
#include "common/state/pack_results.h"
#include "common/state/run_layout.h"

namespace ens {
namespace {

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A directory as it was when read: a replaced one (a rename over it) is another inode; one
// that gained an entry has another link count or size, whatever its mtime's granularity.
struct DirStamp {
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  nlink_t links = 0;
  off_t size = 0;
  bool operator==(const DirStamp& o) const {
    return ino == o.ino && mtime_ns == o.mtime_ns && links == o.links && size == o.size;
  }
  bool operator!=(const DirStamp& o) const { return !(*this == o); }
};
std::optional<DirStamp> StampOf(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  return DirStamp{st.st_ino, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                  st.st_nlink, st.st_size};
}

struct RoundIndex {
  std::optional<DirStamp> packs_dir;                   // <round>/packs when last listed
  std::map<std::string, DirStamp> packs;               // pack dir -> stamp when read
  std::unordered_map<std::string, PackedMember> members;  // latest publication of each
  std::map<std::string, Status> unreadable;            // pack dir -> why it could not be read
  // Members' metrics objects as parsed when their pack was indexed, each handed over once
  // (TakeMetrics: the supervisor reads each member's once); later reads parse its line again.
  std::unordered_map<std::string, nlohmann::json> fresh_metrics;
};

// The packs of the rounds looked at lately (a process reads a handful: its round, the one before).
class PackIndex {
 public:
  static PackIndex& Get() {
    static auto* index = new PackIndex();  // never destroyed: used until exit
    return *index;
  }

  // The member's latest publication in a pack of its round, or NotFound.
  StatusOr<PackedMember> Find(const std::string& member_dir) {
    const std::string name = BaseName(member_dir), members_dir = ParentDir(member_dir);
    if (name.empty() || BaseName(members_dir) != "members")
      return Status::NotFound(member_dir + ": not a member directory path (<round>/members/<name>)");
    const std::string round_dir = ParentDir(members_dir);
    std::lock_guard<std::mutex> lock(mu_);
    RoundIndex& idx = Round(round_dir);
    if (auto m = idx.members.find(name); m != idx.members.end()) {
      auto stamp = StampOf(m->second.pack_dir);
      auto seen = idx.packs.find(m->second.pack_dir);
      if (!stamp || seen == idx.packs.end() || *stamp != seen->second)
        idx = RoundIndex{};  // its pack was replaced or removed: read the round again
    }
    // A pack published since (the member trained again in another pack, after a crash) is
    // read before a member is served: the latest publication wins.
    auto listed = StampOf(round_dir + "/packs");
    if (!listed || !idx.packs_dir || *listed != *idx.packs_dir) Refresh(round_dir, &idx);
    if (auto m = idx.members.find(name); m != idx.members.end()) return m->second;
    std::string why = member_dir + ": no such member (no directory, and no pack of round " + round_dir + " holds it)";
    for (const auto& [dir, st] : idx.unreadable) why += "; unreadable pack: " + st.message();
    return Status::NotFound(why);
  }

  // The metrics object parsed when `m`'s pack was indexed, if not handed over yet.
  std::optional<nlohmann::json> TakeMetrics(const std::string& member_dir, const PackedMember& m) {
    const std::string round_dir = ParentDir(ParentDir(member_dir));
    std::lock_guard<std::mutex> lock(mu_);
    auto r = rounds_.find(round_dir);
    if (r == rounds_.end()) return std::nullopt;
    auto fresh = r->second.fresh_metrics.find(m.name);
    auto indexed = r->second.members.find(m.name);
    if (fresh == r->second.fresh_metrics.end() || indexed == r->second.members.end() ||
        indexed->second.pack_dir != m.pack_dir || indexed->second.line_offset != m.line_offset)
      return std::nullopt;
    std::optional<nlohmann::json> out = std::move(fresh->second);
    r->second.fresh_metrics.erase(fresh);
    return out;
  }

 private:
  RoundIndex& Round(const std::string& round_dir) {
    auto it = rounds_.find(round_dir);
    if (it != rounds_.end()) return it->second;
    if (order_.size() >= kRoundsKept) {
      rounds_.erase(order_.front());
      order_.pop_front();
    }
    order_.push_back(round_dir);
    return rounds_[round_dir];
  }

  // Reads every pack directory of the round not read yet, or changed since.
  static void Refresh(const std::string& round_dir, RoundIndex* idx) {
    const std::string packs = round_dir + "/packs";
    idx->packs_dir = StampOf(packs);  // before listing: a pack published meanwhile is read next time
    DIR* d = ::opendir(packs.c_str());
    if (d == nullptr) return;
    std::vector<std::string> dirs;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0)) continue;
      if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && IsDir(packs + "/" + n))) dirs.push_back(packs + "/" + n);
    }
    ::closedir(d);
    for (const std::string& dir : dirs) {
      auto stamp = StampOf(dir);
      if (!stamp) continue;
      if (auto seen = idx->packs.find(dir); seen != idx->packs.end() && seen->second == *stamp) continue;
      std::vector<nlohmann::json> metrics;
      auto records = ReadPackRecords(dir, &metrics);
      idx->packs[dir] = *stamp;
      if (!records.ok()) {
        idx->unreadable[dir] = records.status();
        continue;
      }
      idx->unreadable.erase(dir);
      for (size_t i = 0; i < records->size(); ++i) {
        PackedMember& m = (*records)[i];
        auto have = idx->members.find(m.name);
        // The latest publication wins; equal stamps: the later directory name, so the choice
        // does not depend on the order readdir lists them.
        if (have != idx->members.end() &&
            (have->second.published_ns > m.published_ns ||
             (have->second.published_ns == m.published_ns && have->second.pack_dir > m.pack_dir)))
          continue;
        if (idx->fresh_metrics.size() < kFreshMetricsKept) idx->fresh_metrics[m.name] = std::move(metrics[i]);
        else idx->fresh_metrics.erase(m.name);
        idx->members[m.name] = std::move(m);
      }
    }
  }

  static constexpr size_t kRoundsKept = 8;
  static constexpr size_t kFreshMetricsKept = 16384;  // a round's: a few kB each
  std::mutex mu_;
  std::map<std::string, RoundIndex> rounds_;
  std::deque<std::string> order_;
};

// The pack files read lately, whole: a supervisor reads a pack's K members one after another
// (records, predictions), so each of those files is read once a pack, not K times. An entry is
// served while its file is the one read (inode, size, mtime: one stat a read); a file retention
// removed, or a pack replaced, is read again (and then not found). Files over kMaxFileBytes are
// read a span at a time; at most kMaxBytes are kept, the oldest dropped first.
class PackFileCache {
 public:
  static PackFileCache& Get() {
    static auto* cache = new PackFileCache();  // never destroyed: used until exit
    return *cache;
  }

  // The bytes [offset, offset + length) of `file`; `who` names them in errors.
  StatusOr<std::string> Read(const std::string& file, uint64_t offset, uint64_t length, const std::string& who) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
      const int err = errno;
      return Status::FromErrno(file + " (" + who + ")", err);
    }
    const FileStamp stamp{st.st_ino, static_cast<uint64_t>(st.st_size),
                          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    if (offset > stamp.size || length > stamp.size - offset)
      return Status::Corruption(file + ": " + who + " [" + std::to_string(offset) + ", +" + std::to_string(length) +
                                ") is past its end (" + std::to_string(stamp.size) + " bytes)");
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->file != file) continue;
      if (it->stamp == stamp) return it->bytes.substr(offset, length);
      bytes_ -= it->bytes.size();
      entries_.erase(it);
      break;
    }
    const bool keep = stamp.size <= kMaxFileBytes;
    auto bytes = ReadSpan(file, keep ? 0 : offset, keep ? stamp.size : length, who);
    if (!bytes.ok() || !keep) return bytes;
    while (!entries_.empty() && bytes_ + bytes->size() > kMaxBytes) {
      bytes_ -= entries_.front().bytes.size();
      entries_.pop_front();
    }
    std::string span = bytes->substr(offset, length);
    bytes_ += bytes->size();
    entries_.push_back({file, stamp, std::move(*bytes)});
    return span;
  }

 private:
  struct FileStamp {
    ino_t ino = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp& o) const { return ino == o.ino && size == o.size && mtime_ns == o.mtime_ns; }
  };
  struct Entry {
    std::string file;
    FileStamp stamp;
    std::string bytes;
  };

  static StatusOr<std::string> ReadSpan(const std::string& file, uint64_t offset, uint64_t length,
                                        const std::string& who) {
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return Status::FromErrno(file + " (" + who + ")", err);
    }
    std::string bytes(length, '\0');
    Status s = PreadFull(fd, bytes.data(), bytes.size(), offset, file);
    ::close(fd);
    if (!s.ok()) return s;
    return bytes;
  }

  static constexpr uint64_t kMaxFileBytes = uint64_t{32} << 20;
  static constexpr uint64_t kMaxBytes = uint64_t{96} << 20;
  std::mutex mu_;
  std::deque<Entry> entries_;
  uint64_t bytes_ = 0;
};

}  // namespace

bool MemberExists(const std::string& member_dir) {
  return IsDir(member_dir) || PackIndex::Get().Find(member_dir).ok();
}

std::string MemberPackDir(const std::string& member_dir) {
  if (IsDir(member_dir)) return "";
  auto m = PackIndex::Get().Find(member_dir);
  return m.ok() ? m->pack_dir : "";
}

namespace {

// Where packed member m's file `path` (<member dir>/<file>) lies in its pack's files.
StatusOr<MemberFileSpan> SpanInPack(const PackedMember& m, const std::string& path, const std::string& file) {
  if (file == MemberFiles::kMemberName || file == MemberFiles::kMetricsName)
    return Status::InvalidArgument(path + ": a record in " + m.pack_dir + "/" + kPackRecordsFile + ", not a span");
  auto span = m.files.find(file);
  if (span == m.files.end())
    return Status::NotFound(path + ": no such file (member " + m.name + " of pack " + m.pack_dir + " has none)");
  return MemberFileSpan{m.pack_dir + "/" + file, span->second.offset, span->second.length, false};
}

}  // namespace

StatusOr<MemberFileSpan> LocateMemberFile(const std::string& path) {
  const std::string dir = ParentDir(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return MemberFileSpan{path, 0, static_cast<uint64_t>(st.st_size), true};
  if (IsDir(dir)) return Status::NotFound(path + ": no such file");
  auto m = PackIndex::Get().Find(dir);
  if (!m.ok()) return m.status();
  return SpanInPack(*m, path, BaseName(path));
}

namespace {

// A packed member's member.json or metrics.json object (its record's `key`), from its line.
StatusOr<nlohmann::json> PackedRecordObject(const PackedMember& m, const char* key) {
  auto line = PackFileCache::Get().Read(m.pack_dir + "/" + kPackRecordsFile, m.line_offset, m.line_length,
                                        "member " + m.name + "'s record");
  if (!line.ok()) return line.status();
  return PackedObject(m, *line, key);
}

const char* RecordKey(const std::string& file) {
  if (file == MemberFiles::kMemberName) return "record";
  if (file == MemberFiles::kMetricsName) return "metrics";
  return nullptr;
}

}  // namespace

StatusOr<std::string> ReadMemberFile(const std::string& path) {
  auto own = ReadFile(path);
  if (own.ok() || own.status().code() != Status::Code::kNotFound) return own;
  const std::string dir = ParentDir(path), file = BaseName(path);
  if (IsDir(dir)) return own;
  auto m = PackIndex::Get().Find(dir);
  if (!m.ok()) return Status::NotFound(path + ": no such file; " + m.status().message());
  if (const char* key = RecordKey(file)) {
    auto j = PackedRecordObject(*m, key);
    if (!j.ok()) return j.status();
    return j->dump(2) + "\n";
  }
  auto where = SpanInPack(*m, path, file);  // the index found above: no second lookup
  if (!where.ok()) return where.status();
  return PackFileCache::Get().Read(where->file, where->offset, where->length, "member " + m->name + "'s " + file);
}

StatusOr<nlohmann::json> ReadMemberJson(const std::string& path) {
  const std::string dir = ParentDir(path), file = BaseName(path);
  const char* key = RecordKey(file);
  if (key == nullptr) return Status::InvalidArgument(path + ": not member.json or metrics.json");
  if (!IsDir(dir)) {
    if (auto m = PackIndex::Get().Find(dir); m.ok()) {
      if (file == MemberFiles::kMetricsName)
        if (auto fresh = PackIndex::Get().TakeMetrics(dir, *m)) return std::move(*fresh);
      return PackedRecordObject(*m, key);
    }
  }
  auto text = ReadMemberFile(path);  // its own file, or NotFound saying why
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Status::Corruption(path + ": not JSON");
  return j;
}

bool MemberFileExists(const std::string& path) {
  if (PathExists(path)) return true;
  const std::string dir = ParentDir(path), file = BaseName(path);
  if (IsDir(dir)) return false;
  auto m = PackIndex::Get().Find(dir);
  if (!m.ok()) return false;
  if (file == MemberFiles::kMemberName || file == MemberFiles::kMetricsName) return true;
  auto where = SpanInPack(*m, path, file);
  return where.ok() && PathExists(where->file);
}

}  // namespace ens
