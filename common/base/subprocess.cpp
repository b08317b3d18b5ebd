#include "common/base/subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/posix/default_launcher.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/stdio.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>

#include "common/base/capabilities.h"

extern char** environ;

namespace ens {

namespace bp = boost::process::v2;
using Clock = std::chrono::steady_clock;

std::string ExitInfo::Describe() const {
  if (!signaled) return "exited with " + std::to_string(code);
  const char* name = sigabbrev_np(signal);
  return "killed by signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
}

ExitInfo ExitInfo::FromWaitStatus(int status) {
  ExitInfo e;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.signal = WTERMSIG(status);
  } else {
    e.code = WEXITSTATUS(status);
  }
  return e;
}

namespace {

boost::asio::io_context& ProcessContext() {
  static boost::asio::io_context* ctx = new boost::asio::io_context();  // never run, never destroyed
  return *ctx;
}

// What the child does between fork and exec (async-signal-safe calls only), as a Boost.Process
// initializer: its own group, its credentials, death with the parent, the passed descriptor,
// an empty mask.
struct ChildSetup {
  const SubprocessSpec* spec;
  pid_t parent;

  bp::error_code on_setup(bp::posix::default_launcher& launcher, const bp::filesystem::path&, const char* const*) {
    if (spec->pass_fd >= 0) launcher.fd_whitelist.push_back(spec->pass_fd_as);
    return {};
  }
  bp::error_code on_exec_setup(bp::posix::default_launcher&, const bp::filesystem::path&, const char* const*) {
    if (spec->new_session) ::setsid();
    else if (spec->own_process_group) ::setpgid(0, 0);
    // The bounding set goes while CAP_SETPCAP is still held (a root parent's is gone after setuid).
    if (spec->drop_capabilities) {
      if (int err = HardenChildRaw(); err != 0) return bp::error_code(err, bp::system_category());
    }
    // Before PR_SET_PDEATHSIG: a change of uid or gid clears it.
    if (spec->credentials) {
      const ProcessCredentials& c = *spec->credentials;
      if (::setgroups(c.groups.size(), c.groups.data()) != 0 || ::setgid(c.gid) != 0 || ::setuid(c.uid) != 0)
        return bp::error_code(errno, bp::system_category());
    }
    if (spec->drop_capabilities) {
      if (int err = DropAllCapabilitiesRaw(); err != 0) return bp::error_code(err, bp::system_category());
    }
    if (spec->die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died between fork and prctl
    }
    if (spec->pass_fd >= 0) {
      // dup2 clears close-on-exec on the copy; one already in place keeps the flag: clear it.
      if (spec->pass_fd == spec->pass_fd_as) ::fcntl(spec->pass_fd_as, F_SETFD, 0);
      else if (::dup2(spec->pass_fd, spec->pass_fd_as) < 0) return bp::error_code(errno, bp::system_category());
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    return {};
  }
  // Boost.Process would exit() (atexit handlers, static destructors) in the forked child of a
  // threaded parent; the parent already has the errno through Boost.Process's pipe.
  void on_exec_error(bp::posix::default_launcher&, const bp::filesystem::path&, const char* const*,
                     const bp::error_code&) {
    ::_exit(127);
  }
};

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

}  // namespace

struct Subprocess::Impl {
  bp::basic_process<boost::asio::io_context::executor_type> process{ProcessContext()};
  pid_t pid = -1;
  bool group = false;
  bool reaped = false;
  ExitInfo exit;
  int in = -1, out = -1;
  ~Impl() {
    CloseFd(&in);
    CloseFd(&out);
  }
};

Subprocess::Subprocess() = default;
Subprocess::Subprocess(Subprocess&&) noexcept = default;
Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    if (impl_ && !impl_->reaped) {
      Signal(SIGKILL);
      Wait();
    }
    impl_ = std::move(o.impl_);
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (impl_ && !impl_->reaped) {
    Signal(SIGKILL);
    Wait();
  }
}

pid_t Subprocess::pid() const { return impl_ ? impl_->pid : -1; }
int Subprocess::stdin_fd() const { return impl_ ? impl_->in : -1; }
int Subprocess::stdout_fd() const { return impl_ ? impl_->out : -1; }
void Subprocess::CloseStdin() {
  if (impl_) CloseFd(&impl_->in);
}
void Subprocess::CloseStdout() {
  if (impl_) CloseFd(&impl_->out);
}
int Subprocess::TakeStdout() {
  if (!impl_) return -1;
  int fd = impl_->out;
  impl_->out = -1;
  return fd;
}
const ExitInfo& Subprocess::exit() const {
  static const ExitInfo kNone;
  return impl_ ? impl_->exit : kNone;
}

bool Subprocess::Exited() {
  if (!impl_) return true;
  if (impl_->reaped) return true;
  int status = 0;
  pid_t r = ::waitpid(impl_->pid, &status, WNOHANG);
  if (r == impl_->pid || (r < 0 && errno == ECHILD)) {
    impl_->reaped = true;
    impl_->exit = r == impl_->pid ? ExitInfo::FromWaitStatus(status) : ExitInfo{true, 0, SIGKILL};
    impl_->process.detach();  // reaped here: Boost must not wait on or kill the pid again
  }
  return impl_->reaped;
}

bool Subprocess::HasEnded() {
  if (!impl_ || impl_->reaped) return true;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(impl_->pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return Exited();
  return info.si_pid == impl_->pid;
}

ExitInfo Subprocess::Wait() {
  if (!impl_) return {};
  while (!impl_->reaped) {
    int status = 0;
    pid_t r = ::waitpid(impl_->pid, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    impl_->reaped = true;
    impl_->exit = r == impl_->pid ? ExitInfo::FromWaitStatus(status) : ExitInfo{true, 0, SIGKILL};
    impl_->process.detach();
  }
  return impl_->exit;
}

void Subprocess::Signal(int sig) {
  if (!impl_ || impl_->reaped || impl_->pid <= 0) return;
  // The group may outlive its leader's exit but a reaped pid can be reused: only while unreaped.
  if (impl_->group) ::kill(-impl_->pid, sig);
  else ::kill(impl_->pid, sig);
}

StatusOr<Subprocess> Subprocess::Start(const SubprocessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return Status::InvalidArgument("empty command line");
  const std::string& name = spec.argv[0];
  bp::filesystem::path exe;
  if (name.find('/') != std::string::npos) {
    exe = name;
  } else {
    exe = bp::environment::find_executable(name);
    if (exe.empty()) return Status::NotFound("program '" + name + "' not found in PATH");
  }

  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& k : spec.unset_env) env.erase(k);
  for (const auto& [k, v] : spec.set_env) env[k] = v;
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<const char*> envp;
  for (const auto& s : env_strings) envp.push_back(s.c_str());
  envp.push_back(nullptr);

  auto impl = std::make_unique<Impl>();
  int child_in = -1, child_out = -1, child_err = -1, null_fd = -1, file_fd = -1;
  auto close_child_ends = [&] {
    for (int* fd : {&child_in, &child_out, &null_fd, &file_fd}) CloseFd(fd);
  };
  auto fail = [&](const std::string& what, int err) {
    close_child_ends();
    return Status::FromErrno(what + " for " + name, err);
  };
  if (spec.stdin_mode == SubprocessSpec::Stdio::kNull ||
      (spec.stdout_file.empty() && spec.stdout_mode == SubprocessSpec::Stdio::kNull)) {
    null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0) return fail("open /dev/null", errno);
  }
  int p[2];
  if (spec.stdin_mode == SubprocessSpec::Stdio::kPipe) {
    if (::pipe2(p, O_CLOEXEC) != 0) return fail("pipe", errno);
    child_in = p[0];
    impl->in = p[1];
  }
  if (!spec.stdout_file.empty()) {
    int mode = spec.stdout_append ? O_APPEND : O_TRUNC;
    file_fd = ::open(spec.stdout_file.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0600);
    if (file_fd < 0) return fail("open " + spec.stdout_file, errno);
  } else if (spec.stdout_mode == SubprocessSpec::Stdio::kPipe) {
    if (::pipe2(p, O_CLOEXEC) != 0) return fail("pipe", errno);
    child_out = p[1];
    impl->out = p[0];
  }
  const int in_fd = child_in >= 0 ? child_in : spec.stdin_mode == SubprocessSpec::Stdio::kNull ? null_fd : 0;
  const int out_fd = file_fd >= 0 ? file_fd : child_out >= 0 ? child_out
                     : spec.stdout_mode == SubprocessSpec::Stdio::kNull ? null_fd : 1;
  child_err = spec.stderr_to_stdout ? out_fd : 2;

  std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  bp::posix::default_launcher launcher;
  launcher.env = envp.data();
  ChildSetup setup{&spec, ::getpid()};
  bp::error_code ec;
  // (1.81's context+error_code overload throws: use the executor one.)
  impl->process = launcher(ProcessContext().get_executor(), ec, exe, args, bp::process_stdio{in_fd, out_fd, child_err}, setup);
  close_child_ends();
  if (ec) {
    if (ec.value() == ENOENT || ec.value() == EACCES || ec.value() == ENOEXEC)
      return Status::NotFound("cannot execute '" + exe.string() + "': " + ec.message());
    return Status::IOError("cannot start '" + exe.string() + "': " + ec.message());
  }
  impl->pid = impl->process.id();
  impl->group = spec.own_process_group || spec.new_session;
  // Both sides set it: no race with an early Signal (a session leader refuses: it has its group).
  if (impl->group) ::setpgid(impl->pid, impl->pid);
  Subprocess sp;
  sp.impl_ = std::move(impl);
  return sp;
}

namespace {
// Every process whose /proc/<pid>/stat field `field` (4: ppid, 6: session) equals `value`.
std::vector<pid_t> ProcessesWith(int field, long value) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (paren == std::string::npos) continue;
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &session) != 4) continue;
    if ((field == 4 ? ppid : session) == value) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}
}  // namespace

std::vector<pid_t> ProcessChildren(pid_t ppid) { return ProcessesWith(4, ppid); }
std::vector<pid_t> SessionProcesses(pid_t sid) { return ProcessesWith(6, sid); }

StatusOr<CommandOutput> RunToEnd(SubprocessSpec spec, const std::string& input, double timeout_s,
                                 const std::function<bool()>& keep_waiting, size_t max_output) {
  constexpr int kTickMs = 200;
  spec.stdin_mode = SubprocessSpec::Stdio::kPipe;
  spec.stdout_mode = SubprocessSpec::Stdio::kPipe;
  spec.stdout_file.clear();
  spec.own_process_group = true;
  const std::string name = spec.argv.empty() ? "" : spec.argv[0];
  auto started = Subprocess::Start(spec);
  if (!started.ok()) return started.status();
  Subprocess& child = *started;
  // SIGPIPE must be ignored by the caller (ensembled's main() does): a child that closes its
  // stdin early shows up as EPIPE here.
  ::fcntl(child.stdin_fd(), F_SETFL, O_NONBLOCK);
  ::fcntl(child.stdout_fd(), F_SETFL, O_NONBLOCK);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  CommandOutput result;
  size_t written = 0;
  if (input.empty()) child.CloseStdin();
  enum { kRunning, kTimedOut, kAbandoned, kTooLarge } end = kRunning;
  auto tick = Clock::now();
  while (end == kRunning) {
    const bool reading = child.stdout_fd() >= 0;
    if (!reading && child.Exited()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      end = kTimedOut;
      break;
    }
    if (keep_waiting && Clock::now() - tick >= std::chrono::milliseconds(kTickMs)) {
      tick = Clock::now();
      if (!keep_waiting()) {
        end = kAbandoned;
        break;
      }
    }
    const int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), reading ? kTickMs : 10));
    if (!reading) {  // output closed: wait for the exit (the rest of the timeout)
      ::poll(nullptr, 0, wait_ms);
      continue;
    }
    struct pollfd p[2] = {{child.stdout_fd(), POLLIN, 0}, {child.stdin_fd(), POLLOUT, 0}};
    int r = ::poll(p, child.stdin_fd() >= 0 ? 2 : 1, wait_ms);
    if (r < 0 && errno != EINTR) return Status::FromErrno("poll on " + name, errno);
    if (child.stdin_fd() >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(child.stdin_fd(), input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) child.CloseStdin();
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = ::read(child.stdout_fd(), buf, sizeof(buf));
      if (n > 0) result.out.append(buf, static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) child.CloseStdout();
      if (result.out.size() > max_output) end = kTooLarge;
    }
  }
  if (end != kRunning) {
    child.Signal(SIGKILL);
    child.Wait();
  }
  switch (end) {
    case kTimedOut:
      return Status::Timeout(name + " did not finish within " + std::to_string(timeout_s) + " s");
    case kAbandoned:
      return Status::Cancelled(name + " abandoned: the caller stopped waiting");
    case kTooLarge:
      return Status::InvalidArgument(name + " wrote more than " + std::to_string(max_output) + " bytes");
    case kRunning:
      break;
  }
  result.exit = child.Wait();
  return result;
}

}  // namespace ens
