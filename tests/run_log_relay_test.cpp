// Tests of orchestrator/run_log_relay: every byte to the log file (appended), each complete
// line to the sink after the file has it, a partial last line at the end or on FlushLine, long
// lines in pieces, never blocking, and a real child's output all there once it has exited.
#include "orchestrator/serve/run_log_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/base/subprocess.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::ReadText;
using ens::testing::TempDir;

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    r = p[0];
    w = p[1];
  }
  ~Pipe() { CloseWrite(); }  // (the read end belongs to the relay)
  void Write(const std::string& s) const { REQUIRE(::write(w, s.data(), s.size()) == static_cast<ssize_t>(s.size())); }
  void CloseWrite() {
    if (w >= 0) ::close(w);
    w = -1;
  }
};

TEST_CASE("complete lines go to the sink and every byte to the file - a partial line waits for its end or FlushLine") {
  TempDir tmp;
  Pipe p;
  std::vector<std::string> lines;
  auto relay = RunLogRelay::Open(p.r, tmp / "serve.log", [&](std::string_view l) { lines.emplace_back(l); });
  REQUIRE(relay.ok());
  RunLogRelay& r = **relay;
  CHECK(r.fd() == p.r);
  CHECK_FALSE(r.Pump());  // nothing there: returns at once
  CHECK(lines.empty());
  p.Write("one\ntwo\r\n\nthr");
  CHECK_FALSE(r.Pump());
  CHECK(lines == std::vector<std::string>{"one", "two", ""});
  CHECK(ReadText(tmp / "serve.log") == "one\ntwo\r\n\nthr");
  p.Write("ee\nfour");
  CHECK_FALSE(r.Pump());
  CHECK(lines.back() == "three");
  r.FlushLine();
  CHECK(lines.back() == "four");
  p.Write("five");
  p.CloseWrite();
  CHECK(r.Pump());  // the end: the pipe is closed and the partial line handed over
  CHECK(r.ended());
  CHECK(r.fd() == -1);
  CHECK(lines == std::vector<std::string>{"one", "two", "", "three", "four", "five"});
  CHECK(ReadText(tmp / "serve.log") == "one\ntwo\r\n\nthree\nfourfive");
  CHECK(r.Pump());  // and stays ended
}

TEST_CASE("the sink sees a line only once the log file has it, and the file is appended to across relays") {
  TempDir tmp;
  const std::string log = tmp.Write("serve.log", "from the run's last start\n");
  Pipe p;
  std::vector<bool> in_file;
  auto relay = RunLogRelay::Open(p.r, log, [&](std::string_view l) {
    in_file.push_back(ReadText(log).find(std::string(l) + "\n") != std::string::npos);
  });
  REQUIRE(relay.ok());
  p.Write("a\nb\n");
  p.CloseWrite();
  CHECK((*relay)->Pump());
  CHECK(in_file == std::vector<bool>{true, true});
  CHECK(ReadText(log) == "from the run's last start\na\nb\n");
}

TEST_CASE("a line longer than kMaxLine goes to the sink in pieces - the file gets it whole") {
  TempDir tmp;
  Pipe p;
  std::vector<std::string> lines;
  auto relay = RunLogRelay::Open(p.r, tmp / "serve.log", [&](std::string_view l) { lines.emplace_back(l); });
  REQUIRE(relay.ok());
  const size_t k = RunLogRelay::kMaxLine;
  const std::string exact(k, 'x'), longer(2 * k + 5, 'y');
  p.Write(exact + "\n" + longer + "\nend\n");
  p.CloseWrite();
  CHECK((*relay)->Pump());
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == exact);
  CHECK(lines[1] == std::string(k, 'y'));
  CHECK(lines[2] == std::string(k, 'y'));
  CHECK(lines[3] == "yyyyy");
  CHECK(lines[4] == "end");
  CHECK(ReadText(tmp / "serve.log") == exact + "\n" + longer + "\nend\n");
}

TEST_CASE("Pump reads at most its budget - the rest waits for the next Pump") {
  TempDir tmp;
  Pipe p;
  REQUIRE(::fcntl(p.w, F_SETPIPE_SZ, 1 << 18) >= (1 << 18));  // room for more than one read of 64 KiB
  size_t count = 0;
  auto relay = RunLogRelay::Open(p.r, tmp / "serve.log", [&](std::string_view) { ++count; });
  REQUIRE(relay.ok());
  std::string line(99, 'z');
  line += '\n';
  std::string many;
  for (int i = 0; i < 2000; ++i) many += line;  // 200 000 bytes
  p.Write(many);
  p.CloseWrite();
  CHECK_FALSE((*relay)->Pump(1000));  // one read (64 KiB): the budget is checked between reads
  CHECK(count == 65536 / 100);
  CHECK((*relay)->Pump());
  CHECK(count == 2000);
}

TEST_CASE("a log file that cannot be opened is an error naming it and the pipe is closed") {
  Pipe p;
  auto relay = RunLogRelay::Open(p.r, "/nonexistent-dir/serve.log", nullptr);
  REQUIRE_FALSE(relay.ok());
  CHECK_THAT(relay.status().message(), Catch::Contains("/nonexistent-dir/serve.log"));
  CHECK(::fcntl(p.r, F_GETFD) == -1);
}

TEST_CASE("a child's stdout and stderr through one pipe are all there once it has exited - nothing lost") {
  TempDir tmp;
  SubprocessSpec spec;
  // More than a pipe holds by default (64 KiB), stderr among it, and a last line with no newline.
  spec.argv = {"/bin/sh", "-c",
               "i=0; while [ $i -lt 3000 ]; do echo \"line $i of the run's output, long enough to fill pipes\"; "
               "i=$((i+1)); done; echo 'to stderr' >&2; printf 'last words'"};
  spec.stdout_mode = SubprocessSpec::Stdio::kPipe;
  spec.stderr_to_stdout = true;
  auto child = Subprocess::Start(spec);
  REQUIRE(child.ok());
  std::vector<std::string> lines;
  auto relay = RunLogRelay::Open(child->TakeStdout(), tmp / "serve.log", [&](std::string_view l) { lines.emplace_back(l); });
  REQUIRE(relay.ok());
  CHECK(child->stdout_fd() == -1);  // the relay's now
  RunLogRelay& r = **relay;
  // As the daemon does: pump while it runs, and once more after its exit.
  while (!child->Exited()) {
    struct pollfd pfd = {r.fd(), POLLIN, 0};
    if (r.fd() >= 0 && ::poll(&pfd, 1, 50) > 0) r.Pump();
    else if (r.fd() < 0) ::usleep(10000);
  }
  CHECK(child->exit().ok());
  r.Pump(size_t{64} << 20);
  r.FlushLine();
  REQUIRE(lines.size() == 3002);
  CHECK(lines[0] == "line 0 of the run's output, long enough to fill pipes");
  CHECK(lines[2999] == "line 2999 of the run's output, long enough to fill pipes");
  CHECK(lines[3000] == "to stderr");
  CHECK(lines[3001] == "last words");
  std::string whole;
  for (size_t i = 0; i + 1 < lines.size(); ++i) whole += lines[i] + "\n";
  CHECK(ReadText(tmp / "serve.log") == whole + "last words");
}

}  // namespace
}  // namespace ens
