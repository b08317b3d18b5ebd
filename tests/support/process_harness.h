// Test support: running the real binaries as child processes (and, via temp_dir.h, temp
// directories).
// Header-only; used by the integration tests. Not thread-safe.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace ens::testing {

inline std::string BinaryPath(const std::string& name) { return std::string(ENS_BINARY_DIR) + "/" + name; }

// char* views of `strings`, null-terminated (for execv/execve); built before fork.
inline std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In a forked child: stdout/stderr to the files, then exec args[0] with `envp` (null: this
// environment). Allocates nothing. Never returns.
[[noreturn]] inline void ExecRedirected(char* const* args, char* const* envp, const char* out_file,
                                        const char* err_file) {
  int out = ::open(out_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err = ::open(err_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(out, 1);
  ::dup2(err, 2);
  if (envp) ::execve(args[0], args, envp);
  else ::execv(args[0], args);
  ::_exit(127);
}

// Starts argv[0] with stdout/stderr redirected to files; returns the pid.
inline pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_file,
                   const std::string& err_file) {
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> args = NullTerminated(argv_copy);
  pid_t pid = ::fork();
  if (pid == 0) ExecRedirected(args.data(), nullptr, out_file.c_str(), err_file.c_str());
  return pid;
}

// Exit code, or 128 + signal.
inline int Wait(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct RunResult {
  int code = -1;
  std::string out, err;
};

inline RunResult Run(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  static int n = 0;
  std::string o = scratch_dir + "/run" + std::to_string(++n) + ".out";
  std::string e = scratch_dir + "/run" + std::to_string(n) + ".err";
  RunResult r;
  r.code = Wait(Spawn(argv, o, e));
  r.out = ReadText(o);
  r.err = ReadText(e);
  return r;
}

// Child pids of `pid` (Linux /proc/PID/task/PID/children).
inline std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t c;
  while (in >> c) out.push_back(c);
  return out;
}

inline std::string MapsOf(pid_t pid) { return ReadText("/proc/" + std::to_string(pid) + "/maps"); }

}  // namespace ens::testing
