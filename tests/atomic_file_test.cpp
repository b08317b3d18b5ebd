// MakeDirs (common/base/atomic_file.h): makes every missing directory of a path with the mode
// asked, accepts one that exists, and names what stands in the way.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "common/base/atomic_file.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  REQUIRE(S_ISDIR(st.st_mode));
  return st.st_mode & 0777;
}

TEST_CASE("MakeDirs makes every missing parent with the mode asked and accepts what exists", "[atomic_file]") {
  TempDir dir;
  const std::string deep = dir.path() + "/a/b/c/d";
  REQUIRE(MakeDirs(deep, 0750).ok());
  for (const std::string p : {dir.path() + "/a", dir.path() + "/a/b", dir.path() + "/a/b/c", deep})
    CHECK(ModeOf(p) == 0750);
  // Again, and with a trailing slash or a doubled one: nothing to do, no error.
  CHECK(MakeDirs(deep).ok());
  CHECK(MakeDirs(deep + "/").ok());
  REQUIRE(MakeDirs(dir.path() + "/a//e/", 0700).ok());
  CHECK(ModeOf(dir.path() + "/a/e") == 0700);
  // A sibling under an existing parent.
  REQUIRE(MakeDirs(dir.path() + "/a/b/c/x").ok());
  CHECK(ModeOf(dir.path() + "/a/b/c/x") == 0700);
}

TEST_CASE("MakeDirs names a file that stands where a directory should be", "[atomic_file]") {
  TempDir dir;
  const std::string file = dir.path() + "/plain";
  { std::ofstream(file) << "x"; }
  Status leaf = MakeDirs(file);
  REQUIRE_FALSE(leaf.ok());
  CHECK(leaf.message().find(file + ": not a directory") != std::string::npos);
  Status below = MakeDirs(file + "/sub/more");
  REQUIRE_FALSE(below.ok());
  CHECK(below.message().find("mkdir " + file + "/sub") != std::string::npos);
}

}  // namespace
}  // namespace ens
