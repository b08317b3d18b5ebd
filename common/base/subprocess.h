// Subprocess: the one place ensembled starts other programs (Boost.Process v2 underneath).
//
// Users: the local executor (workers: own process group, PR_SET_PDEATHSIG, the channel fd,
// the slot's environment), the mutation command (stdin/stdout pipes, timeout, group kill),
// ensemblectl predict/verify (the worker binary, stdout to a file), the Slurm executor
// (sbatch/squeue/scancel) and `ensembled serve` (each run's stdout and stderr into one pipe,
// taken by its log relay).
//
// Contract:
//  - Start() returns only once the child has exec'd its program: a program that cannot be
//    executed (missing, not executable) is an error naming it, never a child that exits 127.
//  - The child gets exactly stdin/stdout/stderr and, when asked, one passed descriptor; every
//    other descriptor of the parent is closed in the child.
//  - The signal mask is cleared in the child (the supervisor blocks signals it reads by signalfd).
//  - Credentials, when given, are set in the child before exec (setgroups, setgid, setuid, then
//    the capabilities dropped when asked); a failure is Start()'s error, as an exec failure is.
//  - A Subprocess that is destroyed while its child still runs kills it (its whole group when
//    it has one) and reaps it: nothing started here outlives its owner unreaped.
//  - Exited() polls (waitpid WNOHANG on this child only: other children are never reaped here).
// Move-only, thread-compatible.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace ens {

// Who a child runs as: set between fork and exec (the parent needs CAP_SETUID and CAP_SETGID).
struct ProcessCredentials {
  uid_t uid = 0;
  gid_t gid = 0;              // its primary group
  std::vector<gid_t> groups;  // its supplementary groups (setgroups), the primary one included
};

struct SubprocessSpec {
  std::vector<std::string> argv;  // argv[0]: a path, or a bare name looked up in PATH
  std::vector<std::pair<std::string, std::string>> set_env;  // added or overridden
  std::vector<std::string> unset_env;                        // removed
  bool own_process_group = false;  // setpgid(0, 0): signals reach what it starts too
  // setsid(): its own session (and group). What it starts stays in that session even in
  // groups of its own, so SessionProcesses() finds it all. Implies own_process_group.
  bool new_session = false;
  bool die_with_parent = false;    // PR_SET_PDEATHSIG=SIGKILL (and exit at once if the parent is gone)
  int pass_fd = -1;                // this descriptor is given to the child as fd `pass_fd_as`
  int pass_fd_as = 3;
  enum class Stdio { kInherit, kNull, kPipe };
  Stdio stdin_mode = Stdio::kInherit;
  Stdio stdout_mode = Stdio::kInherit;  // ignored when stdout_file is set
  std::string stdout_file;              // stdout (and stderr when stderr_to_stdout) to this file
  bool stdout_append = false;           // stdout_file is appended to, not truncated (a log kept across restarts)
  bool stderr_to_stdout = false;
  std::optional<ProcessCredentials> credentials;  // unset: the parent's uid, gid and groups
  // Harden the child before exec, after the credentials (common/base/capabilities.h): its bounding
  // set emptied (when the parent holds CAP_SETPCAP), no_new_privs set, every capability set
  // (ambient and inheritable included) emptied: what it runs holds none and gains none.
  bool drop_capabilities = false;
};

// How a child ended.
struct ExitInfo {
  bool signaled = false;
  int code = 0;    // exit status when !signaled
  int signal = 0;  // terminating signal when signaled
  bool ok() const { return !signaled && code == 0; }
  std::string Describe() const;  // "exited with 3", "killed by signal 9 (SIGKILL)"
  static ExitInfo FromWaitStatus(int status);
};

class Subprocess {
 public:
  Subprocess();
  Subprocess(Subprocess&&) noexcept;
  Subprocess& operator=(Subprocess&&) noexcept;
  ~Subprocess();

  static StatusOr<Subprocess> Start(const SubprocessSpec& spec);

  pid_t pid() const;
  bool valid() const { return impl_ != nullptr; }
  // Our ends of the pipes asked for (-1 otherwise). Owned by the Subprocess until TakeStdout().
  int stdin_fd() const;
  int stdout_fd() const;
  void CloseStdin();
  void CloseStdout();
  // Hands our end of the stdout pipe to the caller, who closes it (close-on-exec is set);
  // stdout_fd() is -1 after. -1 when there is none.
  int TakeStdout();
  // True once the child has exited (and is reaped); exit() then says how.
  bool Exited();
  // True once the child has exited, which it leaves unreaped (a zombie): its pid, and so its
  // group id, cannot be reused yet, so Signal still reaches exactly what is left of its group.
  // Exited() or Wait() reaps it after.
  bool HasEnded();
  // Blocks until the child exits.
  ExitInfo Wait();
  const ExitInfo& exit() const;
  // Sends `sig` to the child, or to its whole group when it has one. No-op once reaped.
  void Signal(int sig);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Processes whose parent is `ppid`, and processes in session `sid`, from /proc (a snapshot:
// zombies included, processes started meanwhile maybe not). Empty when /proc is unreadable.
std::vector<pid_t> ProcessChildren(pid_t ppid);
std::vector<pid_t> SessionProcesses(pid_t sid);

// The result of running a program to its end with RunToEnd.
struct CommandOutput {
  ExitInfo exit;
  std::string out;  // stdout (bounded by max_output)
};

// Runs spec (stdin and stdout are piped; spec's modes are overridden), writes `input` to its
// stdin, collects stdout. Timeout when it has not exited within timeout_s; Cancelled when
// keep_waiting (asked about every 200 ms) says false; InvalidArgument when it writes more than
// max_output bytes. In all three cases its process group is killed (spec.own_process_group
// is forced on). A program that cannot be executed is NotFound naming it.
StatusOr<CommandOutput> RunToEnd(SubprocessSpec spec, const std::string& input, double timeout_s,
                                 const std::function<bool()>& keep_waiting = {},
                                 size_t max_output = size_t{256} << 20);

}  // namespace ens
