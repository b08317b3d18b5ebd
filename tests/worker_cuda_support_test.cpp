// Tests of worker/cuda_support through the real ensemble-worker: a CPU worker never loads
// libtorch's CUDA half; a worker run with no CUDA_VISIBLE_DEVICES loads it (and runs on the CPU
// where there is no GPU, as before); a worker given a GPU whose CUDA support cannot load fails
// at start, permanently, naming the GPU and the loader's error; a GPU worker whose GPU CUDA
// does not see (hook ENSEMBLED_TEST_CUDA_SEES, or the real driver API where there is no GPU)
// says "unusable" instead of ready. A served worker says ready over the channel it is given and
// exits 0 when the supervisor's end closes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "common/base/exit_codes.h"
#include "common/ipc/protocol.h"
#include "common/ipc/worker_channel.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using namespace ens::testing;

struct ServedWorker {
  pid_t pid = -1;
  WorkerChannel link;  // the supervisor's end
  ~ServedWorker() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Starts `ensemble-worker serve` as the supervisor would: its channel on kWorkerChannelFd,
// CUDA_VISIBLE_DEVICES as given (nullopt: unset), stderr to err_file.
void StartServe(ServedWorker* w, std::optional<std::string> visible, const std::string& err_file,
                const std::string& cuda_lib = "") {
  auto pair = WorkerChannel::Pair();
  REQUIRE(pair.ok());
  std::string bin = BinaryPath("ensemble-worker");
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (visible) ::setenv("CUDA_VISIBLE_DEVICES", visible->c_str(), 1);
    else ::unsetenv("CUDA_VISIBLE_DEVICES");
    if (!cuda_lib.empty()) ::setenv("ENSEMBLED_TORCH_CUDA_LIB", cuda_lib.c_str(), 1);
    ::dup2(pair->second.fd(), kWorkerChannelFd);
    FILE* err = std::freopen(err_file.c_str(), "w", stderr);
    (void)err;
    ::execl(bin.c_str(), bin.c_str(), "serve", "--run-id", "cudatest", "--slot", "0", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  w->pid = pid;
  w->link = std::move(pair->first);
}

// The next message from the worker, decoded (waits up to timeout_ms).
Message NextMessage(ServedWorker& w, int timeout_ms = 60000) {
  auto got = w.link.Receive(timeout_ms);
  REQUIRE(got.ok());
  REQUIRE(got->kind == WorkerChannel::Received::kMessage);
  auto m = DecodeMessage(got->bytes);
  REQUIRE(m.ok());
  return *m;
}

// Waits for the worker's ready message; returns its maps while it idles.
std::string MapsWhenReady(ServedWorker& w) {
  Message m = NextMessage(w);
  CHECK(m.type == MessageType::kReady);
  CHECK(m.pid == w.pid);
  return MapsOf(w.pid);
}

// Closes the supervisor's end; the worker must exit 0 on its own.
int ExitAfterClose(ServedWorker& w) {
  w.link.Close();
  int code = WaitAtMost(w.pid, 30);
  w.pid = -1;
  return code;
}

TEST_CASE("a CPU worker never loads libtorch_cuda", "[cuda_support]") {
  TempDir tmp;
  ServedWorker w;
  StartServe(&w, std::string(""), tmp / "err");
  std::string maps = MapsWhenReady(w);
  CHECK(maps.find("libtorch_cpu.so") != std::string::npos);
  CHECK(maps.find("libtorch_cuda.so") == std::string::npos);
  CHECK(ExitAfterClose(w) == 0);
}

TEST_CASE("a worker with CUDA_VISIBLE_DEVICES unset loads libtorch_cuda and still runs", "[cuda_support]") {
  TempDir tmp;
  ServedWorker w;
  StartServe(&w, std::nullopt, tmp / "err");
  std::string maps = MapsWhenReady(w);
  INFO(ReadText(tmp / "err"));
  CHECK(maps.find("libtorch_cuda.so") != std::string::npos);
  CHECK(ExitAfterClose(w) == 0);
}

TEST_CASE("a GPU worker whose CUDA support cannot load fails at start, permanently", "[cuda_support]") {
  TempDir tmp;
  ServedWorker w;
  StartServe(&w, std::string("3"), tmp / "err", "libensembled-no-such-cuda.so");
  int code = WaitAtMost(w.pid, 30);
  w.pid = -1;
  std::string err = ReadText(tmp / "err");
  INFO(err);
  CHECK(code == exit_code::kPermanentFailure);
  CHECK(err.find("given GPU 3") != std::string::npos);
  CHECK(err.find("libensembled-no-such-cuda.so") != std::string::npos);
  // It said why instead of ready, then closed.
  Message m = NextMessage(w, 0);
  CHECK(m.type == MessageType::kUnusable);
  CHECK(m.error.find("libensembled-no-such-cuda.so") != std::string::npos);
  auto got = w.link.Receive(0);
  REQUIRE(got.ok());
  CHECK(got->kind == WorkerChannel::Received::kClosed);
}

// The first message of a worker given GPU `visible` while CUDA reports `sees`.
Message FirstMessage(const std::string& visible, const std::string& sees, const std::string& err_file) {
  ::setenv("ENSEMBLED_TEST_CUDA_SEES", sees.c_str(), 1);
  ServedWorker w;
  StartServe(&w, visible, err_file);
  ::unsetenv("ENSEMBLED_TEST_CUDA_SEES");
  Message m = NextMessage(w);
  if (m.type == MessageType::kUnusable) CHECK(WaitAtMost(w.pid, 30) == exit_code::kPermanentFailure);
  else CHECK(ExitAfterClose(w) == 0);
  w.pid = -1;
  return m;
}

TEST_CASE("a GPU worker checks that CUDA sees the GPU it was given before it says ready", "[cuda_support]") {
  TempDir tmp;
  const std::string gpu = "GPU-fa4e0001-0000-4000-8000-000000000000";
  Message none = FirstMessage(gpu, "none", tmp / "e1");
  CHECK(none.type == MessageType::kUnusable);
  CHECK(none.error.find("given GPU " + gpu) != std::string::npos);
  CHECK(none.error.find("CUDA sees no device") != std::string::npos);
  Message other = FirstMessage(gpu, "GPU-fa4e0002-0000-4000-8000-000000000000", tmp / "e2");
  CHECK(other.type == MessageType::kUnusable);
  CHECK(other.error.find("CUDA sees a different device, fa4e0002") != std::string::npos);
  Message same = FirstMessage(gpu, "given", tmp / "e3");
  CHECK(same.type == MessageType::kReady);
  // A unique prefix, as CUDA accepts it (an inherited CUDA_VISIBLE_DEVICES passed through).
  Message prefix = FirstMessage("GPU-fa4e0001", gpu, tmp / "e5");
  CHECK(prefix.type == MessageType::kReady);
  Message wrong_prefix = FirstMessage("GPU-fa4e0002", gpu, tmp / "e6");
  CHECK(wrong_prefix.type == MessageType::kUnusable);
  // Without the hook, on a machine with no NVIDIA driver, the real check says so.
  if (::access("/proc/driver/nvidia", F_OK) != 0) {
    ServedWorker w;
    StartServe(&w, gpu, tmp / "e4");
    Message m = NextMessage(w);
    CHECK(m.type == MessageType::kUnusable);
    CHECK(m.error.find("given GPU " + gpu) != std::string::npos);
  }
}

}  // namespace
}  // namespace ens
