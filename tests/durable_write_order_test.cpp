// The order of a durable write, observed: WriteFileAtomic writes its temporary file, fsyncs it
// (with every byte in it), renames it over the target and fsyncs the directory; a journal's
// Append reaches the disk (fdatasync, the record in the file) before it returns; a directory
// renamed into place is followed by its parent's fsync. A power loss then leaves the old or the
// new content, never a file the directory does not name or a record that was acknowledged but
// lost (common/base/atomic_file.h, common/state/journal.h).
//
// A recording shim: this program defines fsync, fdatasync, rename and renameat itself. The
// library code linked into it (libens_common) calls these, which record the call (the path the
// descriptor names, the file's size at that moment) and then do the real one (dlsym RTLD_NEXT).
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <climits>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "common/base/atomic_file.h"
#include "common/state/journal.h"
#include "support/temp_dir.h"

namespace {

std::mutex g_mu;
bool g_recording = false;
std::vector<std::string> g_calls;

std::string PathOfFd(int fd) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "fd" + std::to_string(fd);
}

std::string PathAt(int dirfd, const char* path) {
  if (path[0] == '/' || dirfd == AT_FDCWD) return path;
  return PathOfFd(dirfd) + "/" + path;
}

void Record(std::string call) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_recording) g_calls.push_back(std::move(call));
}

// "fsync <path>" for a directory, "fsync <path> <size>" for a file.
std::string SyncCall(const char* what, int fd) {
  struct stat st {};
  std::string call = std::string(what) + " " + PathOfFd(fd);
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) call += " " + std::to_string(st.st_size);
  return call;
}

template <typename F>
F Real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int fsync(int fd) {
  Record(SyncCall("fsync", fd));
  static auto real = Real<int (*)(int)>("fsync");
  return real(fd);
}

int fdatasync(int fd) {
  Record(SyncCall("fdatasync", fd));
  static auto real = Real<int (*)(int)>("fdatasync");
  return real(fd);
}

int rename(const char* from, const char* to) noexcept {
  Record(std::string("rename ") + from + " " + to);
  static auto real = Real<int (*)(const char*, const char*)>("rename");
  return real(from, to);
}

int renameat(int from_dir, const char* from, int to_dir, const char* to) noexcept {
  Record("rename " + PathAt(from_dir, from) + " " + PathAt(to_dir, to));
  static auto real = Real<int (*)(int, const char*, int, const char*)>("renameat");
  return real(from_dir, from, to_dir, to);
}

}  // extern "C"

namespace ens {
namespace {

using ens::testing::TempDir;

// The calls `body` makes, recorded.
template <typename F>
std::vector<std::string> Recorded(F body) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_calls.clear();
    g_recording = true;
  }
  body();
  std::lock_guard<std::mutex> lock(g_mu);
  g_recording = false;
  return g_calls;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

TEST_CASE("WriteFileAtomic: the temporary file synced whole, renamed over the target, then the directory synced",
          "[durability]") {
  TempDir t;
  const std::string dir = std::filesystem::canonical(t.path()).string(), path = dir + "/state.json";
  const std::string content = "{\"round\": 3}\n";
  std::vector<std::string> calls = Recorded([&] { REQUIRE(WriteFileAtomic(path, content).ok()); });
  INFO(Joined(calls));
  CHECK(calls == std::vector<std::string>{"fsync " + path + ".tmp " + std::to_string(content.size()),
                                          "rename " + path + ".tmp " + path, "fsync " + dir});
  // Replacing it: the same order again.
  calls = Recorded([&] { REQUIRE(WriteFileAtomic(path, "x").ok()); });
  INFO(Joined(calls));
  CHECK(calls == std::vector<std::string>{"fsync " + path + ".tmp 1", "rename " + path + ".tmp " + path,
                                          "fsync " + dir});
  // WriteFileReplace promises no durability: it renames, and syncs nothing.
  calls = Recorded([&] { REQUIRE(WriteFileReplace(path, "y").ok()); });
  CHECK(calls == std::vector<std::string>{"rename " + path + ".tmp " + path});
}

TEST_CASE("a journal's record is on the disk (fdatasync, the whole line in the file) when Append returns",
          "[durability]") {
  TempDir t;
  const std::string dir = std::filesystem::canonical(t.path()).string(), path = dir + "/journal.jsonl";
  auto journal = Journal::Open(path);
  REQUIRE(journal.ok());
  std::vector<std::string> calls = Recorded([&] { REQUIRE((*journal)->Append({{"event", "round_committed"}}).ok()); });
  const auto size = std::filesystem::file_size(path);
  INFO(Joined(calls));
  CHECK(calls == std::vector<std::string>{"fdatasync " + path + " " + std::to_string(size)});
  calls = Recorded([&] { REQUIRE((*journal)->AppendBatch({{{"event", "a"}}, {{"event", "b"}}}).ok()); });
  INFO(Joined(calls));
  REQUIRE(calls.size() == 1);  // one sync for the batch, after both lines
  CHECK(calls[0] == "fdatasync " + path + " " + std::to_string(std::filesystem::file_size(path)));
}

TEST_CASE("a directory renamed into place is followed by its parent's fsync", "[durability]") {
  TempDir t;
  const std::string dir = std::filesystem::canonical(t.path()).string();
  std::filesystem::create_directories(dir + "/round-1.tmp");
  std::vector<std::string> calls = Recorded([&] { REQUIRE(RenameDirAtomic(dir + "/round-1.tmp", dir + "/round-1").ok()); });
  INFO(Joined(calls));
  CHECK(calls == std::vector<std::string>{"rename " + dir + "/round-1.tmp " + dir + "/round-1", "fsync " + dir});
}

}  // namespace
}  // namespace ens
