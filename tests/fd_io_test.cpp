// Tests of common/fd_io: whole transfers across short reads and writes, at the descriptor's
// offset and at a file offset, and the errors that name what was read or written.
#include "common/base/fd_io.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "support/temp_dir.h"

namespace ens {
namespace {

using testing::TempDir;

TEST_CASE("WriteFull and ReadFull move every byte through a pipe smaller than the data", "[fd_io]") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  REQUIRE(::fcntl(p[1], F_SETPIPE_SZ, 4096) >= 0);
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 251);
  pid_t child = ::fork();
  if (child == 0) {  // the writer: the pipe takes at most a page at a time
    ::close(p[0]);
    ::_exit(WriteFull(p[1], data.data(), data.size(), "pipe").ok() ? 0 : 1);
  }
  ::close(p[1]);
  std::string got(data.size(), '\0');
  bool eof = true;
  REQUIRE(ReadFull(p[0], got.data(), got.size(), "pipe", &eof).ok());
  CHECK_FALSE(eof);
  CHECK(got == data);
  char extra;
  CHECK(ReadFull(p[0], &extra, 1, "pipe", &eof).ok());
  CHECK(eof);  // the end of input before a record's first byte is no error
  ::close(p[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("PwriteFull and PreadFull work at an offset and name a file that ends early", "[fd_io]") {
  TempDir dir;
  const std::string path = dir.File("f.bin");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(PwriteFull(fd, "abcdef", 6, 10, path).ok());
  CHECK(::lseek(fd, 0, SEEK_CUR) == 0);  // the descriptor's offset is untouched
  char buf[6] = {};
  REQUIRE(PreadFull(fd, buf, 4, 12, path).ok());
  CHECK(std::string(buf, 4) == "cdef");
  Status s = PreadFull(fd, buf, 6, 12, path);
  CHECK(s.code() == Status::Code::kCorruption);
  CHECK_THAT(s.message(), Catch::StartsWith(path + ": truncated"));
  ::close(fd);
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  s = PwriteFull(fd, "x", 1, 0, path);  // read-only: the errno, with the path
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::StartsWith("write " + path));
  ::close(fd);
}

}  // namespace
}  // namespace ens
