// ensembled: the supervisor daemon. `ensembled run --config FILE` runs (or resumes) the
// closed loop the config describes. It never loads libtorch or initialises CUDA.
#include <signal.h>
#include <sys/signalfd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <spdlog/spdlog.h>

#include "common/config.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "orchestrator/supervisor.h"

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
  CLI11_PARSE(app, argc, argv);

  auto cfg = ens::LoadConfigFile(config_path);
  ens::InitLogging("ensembled", cfg.ok() ? cfg->service.log_file : "");
  if (!cfg.ok()) {
    spdlog::error("{}", cfg.status().message());
    return ens::exit_code::kPermanentFailure;
  }
  if (worker.empty()) {
    const char* env = std::getenv("ENSEMBLED_WORKER");
    worker = env ? env : ens::SelfDir() + "/ensemble-worker";
  }
  // Signals are taken synchronously from a signalfd inside the loop's poll(); workers get an
  // empty mask back after fork.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  ens::Supervisor sup(std::move(*cfg), ens::SupervisorOptions{worker, config_path, sfd, accept_config_change});
  return sup.Run();
}
