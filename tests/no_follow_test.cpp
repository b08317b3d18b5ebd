// Tests of common/no_follow: what a privileged process opens in a place another user can write
// is what it checked: no symbolic link anywhere in the path, no '..', no FIFO that hangs, no
// hard link, the owner it expects, a size cap; a directory made for a user through
// descriptors and never taken over; a drop file published without replacing anything.
#include "common/base/no_follow.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A symbolic link of a user's (as root: given to uid 4242), which is never followed.
void UserLink(const std::string& target, const std::string& path) {
  REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
  if (::geteuid() == 0) REQUIRE(::lchown(path.c_str(), 4242, 4242) == 0);
}

TEST_CASE("a plain file is read - links, '..', FIFOs, hard links, another owner and oversize are refused, naming why",
          "[no_follow]") {
  TempDir t;
  const std::string dir = t.path();
  Write(dir + "/a.json", "{\"x\": 1}");
  uid_t owner = 1;
  StatusOr<std::string> text = ReadNoFollow(dir + "/a.json", {::geteuid()}, &owner);
  REQUIRE(text.ok());
  CHECK(*text == "{\"x\": 1}");
  CHECK(owner == ::geteuid());

  // A symbolic link as the last component, and as a directory on the way.
  UserLink(dir + "/a.json", dir + "/link.json");
  StatusOr<std::string> r = ReadNoFollow(dir + "/link.json", {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("link.json is a symbolic link (not followed)"));
  std::filesystem::create_directories(dir + "/real");
  Write(dir + "/real/b.json", "b");
  UserLink(dir + "/real", dir + "/via");
  r = ReadNoFollow(dir + "/via/b.json", {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("via is a symbolic link (not followed)"));
  CHECK(ReadNoFollow(dir + "/real/b.json", {}).ok());
  if (::geteuid() == 0) {  // root's own link (an administrator's /data -> /srv/data) is followed
    REQUIRE(::symlink("real", (dir + "/roots").c_str()) == 0);
    StatusOr<std::string> via_root = ReadNoFollow(dir + "/roots/b.json", {});
    INFO(via_root.status().message());
    CHECK(via_root.ok());
  }

  r = ReadNoFollow(dir + "/real/../a.json", {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("'..'"));

  // A FIFO with no writer: refused at once, not waited on.
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0666) == 0);
  auto t0 = std::chrono::steady_clock::now();
  r = ReadNoFollow(dir + "/fifo", {});
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("a FIFO, not a regular file"));

  REQUIRE(::link((dir + "/real/b.json").c_str(), (dir + "/hard.json").c_str()) == 0);
  r = ReadNoFollow(dir + "/hard.json", {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("has 2 links"));

  r = ReadNoFollow(dir + "/a.json", {::geteuid() + 1});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("belongs to uid " + std::to_string(::geteuid())));

  r = ReadNoFollow(dir + "/a.json", {std::nullopt, 3});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("over the limit of 3"));

  r = ReadNoFollow(dir + "/missing.json", {});
  CHECK(r.status().code() == Status::Code::kNotFound);
  r = ReadNoFollow(dir + "/real", {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("a directory, not a regular file"));
}

TEST_CASE("a socket is reached through its checked inode, not a link to another", "[no_follow]") {
  TempDir t;
  const std::string dir = t.path(), path = dir + "/s.sock";
  int srv = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  REQUIRE(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(srv, 1) == 0);
  StatusOr<int> fd = OpenSocketNoFollow(path, {::geteuid()});
  REQUIRE(fd.ok());
  int cli = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un via{};
  via.sun_family = AF_UNIX;
  std::snprintf(via.sun_path, sizeof(via.sun_path), "%s", ProcFdPath(*fd).c_str());
  CHECK(::connect(cli, reinterpret_cast<sockaddr*>(&via), sizeof(via)) == 0);
  ::close(cli);
  ::close(*fd);
  UserLink(path, dir + "/other.sock");
  StatusOr<int> linked = OpenSocketNoFollow(dir + "/other.sock", {});
  REQUIRE_FALSE(linked.ok());
  CHECK_THAT(linked.status().message(), Catch::Contains("symbolic link"));
  Write(dir + "/plain", "x");
  StatusOr<int> plain = OpenSocketNoFollow(dir + "/plain", {});
  REQUIRE_FALSE(plain.ok());
  CHECK_THAT(plain.status().message(), Catch::Contains("a regular file, not a socket"));
  ::close(srv);
}

TEST_CASE("a directory made for a user is its own - an existing one of anyone else is never taken over",
          "[no_follow]") {
  TempDir t;
  const std::string dir = t.path();
  StatusOr<bool> made = MakeOwnedDir(dir, "run1", 0750, ::geteuid(), ::getegid());
  REQUIRE(made.ok());
  CHECK(*made);
  struct stat st {};
  REQUIRE(::stat((dir + "/run1").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);
  made = MakeOwnedDir(dir, "run1", 0750, ::geteuid(), ::getegid());  // its own: kept, not made
  REQUIRE(made.ok());
  CHECK_FALSE(*made);
  made = MakeOwnedDir(dir, "run1", 0750, ::geteuid() + 1, ::getegid());
  REQUIRE_FALSE(made.ok());
  CHECK_THAT(made.status().message(), Catch::Contains("never taken over"));
  UserLink(dir + "/run1", dir + "/run2");
  made = MakeOwnedDir(dir, "run2", 0750, ::geteuid(), ::getegid());
  REQUIRE_FALSE(made.ok());
  CHECK_THAT(made.status().message(), Catch::Contains("symbolic link"));
  for (const char* bad : {"..", ".", ".hidden", "a/b", ""}) CHECK_FALSE(MakeOwnedDir(dir, bad, 0750, 0, 0).ok());
}

TEST_CASE("a published drop file never replaces or writes through what is there", "[no_follow]") {
  TempDir t;
  const std::string dir = t.path();
  REQUIRE(PublishNew(dir, "r.json", "one", 0640, static_cast<gid_t>(-1)).ok());
  std::ifstream in(dir + "/r.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "one");
  struct stat st {};
  REQUIRE(::stat((dir + "/r.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  Status again = PublishNew(dir, "r.json", "two", 0640, static_cast<gid_t>(-1));
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(again.message(), Catch::Contains("exists already"));
  // A link planted where the file would go: left as it is, its target untouched.
  Write(dir + "/target", "mine");
  UserLink(dir + "/target", dir + "/s.json");
  CHECK_FALSE(PublishNew(dir, "s.json", "theirs", 0640, static_cast<gid_t>(-1)).ok());
  std::ifstream target(dir + "/target");
  std::string kept((std::istreambuf_iterator<char>(target)), std::istreambuf_iterator<char>());
  CHECK(kept == "mine");
  // No temporary file is left behind.
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().filename().string()[0] == '.' ? 1 : 0;
  CHECK(n == 0);
  CHECK_FALSE(PublishNew(dir, "../x.json", "x", 0640, static_cast<gid_t>(-1)).ok());
}

}  // namespace
}  // namespace ens
