#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "common/worker_channel.h"
#include "orchestrator/executor.h"

extern char** environ;

namespace ens {

StatusOr<pid_t> LocalExecutor::Start(const WorkerLaunch& launch) {
  if (launch.argv.empty()) return Status::InvalidArgument("empty worker argv");
  // Build argv/envp before fork: the child only calls async-signal-safe functions.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& k : launch.unset_env) env.erase(k);
  for (const auto& [k, v] : launch.set_env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = launch.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // parent died between fork and prctl
    if (launch.channel_fd >= 0) {
      // dup2 clears close-on-exec on the copy; an fd already at its place keeps the flag, so clear it.
      if (launch.channel_fd == kWorkerChannelFd) ::fcntl(kWorkerChannelFd, F_SETFD, 0);
      else if (::dup2(launch.channel_fd, kWorkerChannelFd) < 0) ::_exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    const char msg[] = "ensembled: exec of worker failed\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  return pid;
}

void LocalExecutor::Signal(pid_t pid, int sig) {
  if (pid > 0) ::kill(pid, sig);
}

}  // namespace ens
