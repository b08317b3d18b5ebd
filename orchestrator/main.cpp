// ensembled: the supervisor daemon. `ensembled run --config FILE` runs (or resumes) the
// closed loop the config describes; `ensembled serve --config serve.json` runs every run config
// of a directory, each as its own `ensembled run` (orchestrator/serve/serve_daemon.h). It never loads
// libtorch or initialises CUDA.
#include <signal.h>
#include <sys/signalfd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <spdlog/spdlog.h>

#include "common/config/config.h"
#include "common/base/env_vars.h"
#include "common/base/exit_codes.h"
#include "common/base/logging.h"
#include "orchestrator/serve/serve_config.h"
#include "orchestrator/serve/serve_daemon.h"
#include "orchestrator/run/supervisor.h"

namespace {

// Signals are taken synchronously from a signalfd inside the loop's poll(); children get an
// empty mask back after fork.
int BlockedSignalFd(std::initializer_list<int> signals) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : signals) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

// Without the signalfd, SIGTERM would stay blocked and never be read: refuse to start.
int NoSignalFd() {
  spdlog::error("signalfd: {} (SIGTERM and SIGINT could not be received; not starting)", std::strerror(errno));
  return ens::exit_code::kTransientFailure;
}

int Serve(const std::string& config_path) {
  auto cfg = ens::LoadServeConfigFile(config_path);
  ens::InitLogging("ensembled", cfg.ok() ? cfg->service.log_file : "");
  if (!cfg.ok()) {
    spdlog::error("{}", cfg.status().message());
    return ens::exit_code::kPermanentFailure;
  }
  int sfd = BlockedSignalFd({SIGINT, SIGTERM, SIGHUP, SIGCHLD});
  if (sfd < 0) return NoSignalFd();
  ens::ServeDaemon daemon(std::move(*cfg), ens::ServeOptions{ens::SelfDir() + "/ensembled", sfd});
  return daemon.Run();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ensembled: trains ensembles of neural networks in a closed loop"};
  app.require_subcommand(1);
  std::string config_path, worker;
  bool accept_config_change = false;
  auto* run = app.add_subcommand("run", "run or resume the loop a config describes");
  run->add_option("--config,-c", config_path, "config file (JSON with comments)")->required();
  run->add_option("--worker", worker, "ensemble-worker binary (default: beside ensembled, or $ENSEMBLED_WORKER)");
  run->add_flag("--accept-config-change", accept_config_change,
                "resume although the config changes results: a new config epoch from the next uncommitted round");
  std::string serve_config;
  auto* serve = app.add_subcommand("serve", "run every run config of a directory, each with its share of the machine");
  serve->add_option("--config,-c", serve_config, "serve config (JSON with comments; configs/serve.json)")->required();
  CLI11_PARSE(app, argc, argv);
  if (*serve) return Serve(serve_config);

  auto cfg = ens::LoadConfigFile(config_path);
  ens::InitLogging("ensembled", cfg.ok() ? cfg->service.log_file : "");
  if (!cfg.ok()) {
    spdlog::error("{}", cfg.status().message());
    return ens::exit_code::kPermanentFailure;
  }
  if (worker.empty()) {
    const char* env = EnvVarValue(ens::EnvVar::kWorker);
    worker = env ? env : ens::SelfDir() + "/ensemble-worker";
  }
  int sfd = BlockedSignalFd({SIGINT, SIGTERM, SIGHUP});
  if (sfd < 0) return NoSignalFd();
  ens::Supervisor sup(std::move(*cfg), ens::SupervisorOptions{worker, config_path, sfd, accept_config_change});
  return sup.Run();
}
