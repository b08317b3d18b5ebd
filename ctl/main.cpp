// ensemblectl: the operator's tool. It reads the run state directly and runs
// ensemble-worker for anything that needs libtorch, so it never loads libtorch itself.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/atomic_file.h"
#include "common/config.h"
#include "common/data_source.h"
#include "common/exit_codes.h"
#include "ctl/commands.h"
#include "orchestrator/script_model_check.h"

namespace ens::ctl {

// The columns (features, targets) of the config's training data, from the synthetic count or
// the file's header (a CSV is opened, an npy pair's headers read; no row is kept).
StatusOr<Table> DataColumns(const DataSpec& d) {
  if (d.source == DataSource::kSynthetic) {
    Table t;
    t.features = d.synthetic_features;
    return t;
  }
  auto reader = d.source == DataSource::kCsv ? OpenCsv(d.train_path, d.feature_columns, d.target_columns)
                                  : OpenNpyPair(d.x_path, d.y_path);
  if (!reader.ok()) return reader.status();
  return (*reader)->columns();
}

// What needs the data's columns: an npy y of several columns against the members (csv's
// target_columns were checked with the config), and the TorchScript members' modules, each
// run once on a zero batch of the data's width (the class count of a classifier is known only
// at run start, where ensembled checks it again).
std::vector<ConfigError> CheckAgainstData(const Config& cfg) {
  bool any = false;
  for (const auto& m : cfg.members) any = any || m.model.kind == ModelKind::kTorchscript;
  if (!any && cfg.data.source != DataSource::kNpy) return {};
  auto columns = DataColumns(cfg.data);
  if (!columns.ok()) {
    if (!any) return {};  // ensembled names the file's problem at start; validate-config checks the config
    return {{"/data", "cannot read the data's columns to check the TorchScript members: " + columns.status().message()}};
  }
  if (std::string why = TargetCountProblem(cfg, columns->targets, cfg.data.y_path); !why.empty())
    return {{"/data/y_path", why}};
  if (!any) return {};
  return CheckScriptModels(cfg.members, columns->features, RequiredOutputs(cfg, 0, columns->targets), WorkerBinary());
}

int ValidateConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    std::cerr << text.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  Config cfg;
  auto errors = ValidateConfigText(*text, ParentDir(path), &cfg);
  if (errors.empty()) errors = CheckAgainstData(cfg);
  for (const auto& e : errors) std::cout << path << ": " << (e.pointer.empty() ? "/" : e.pointer) << ": " << e.message << "\n";
  if (!errors.empty()) return exit_code::kPermanentFailure;
  std::cout << path << ": ok (" << cfg.members.size() << " members, " << cfg.rounds.count << " rounds, mutation "
            << Name(cfg.mutation.policy) << ")\n";
  return exit_code::kOk;
}

}  // namespace ens::ctl

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a program run with pipes (a command member's predict_argv) may close its end
  CLI::App app{"ensemblectl: inspect and use an ensembled run"};
  app.require_subcommand(1);
  std::string state_dir, input, output = "-", config;
  int round = -1;
  bool as_json = false;

  std::string socket;
  std::string served;  // a run of `ensembled serve`, by name (with the daemon's --socket)
  // A per-run command names its run by --state-dir, or by NAME with the serve daemon's --socket.
  auto run_options = [&](CLI::App* c, bool has_socket) {
    auto* dir = c->add_option("--state-dir,-s", state_dir, "the run's state directory");
    auto* name = c->add_option("run", served, "a run of `ensembled serve`, by name (with the daemon's --socket)");
    dir->excludes(name);
    name->excludes(dir);
    if (has_socket)
      c->add_option("--socket", socket,
                    "with a run NAME: the serve daemon's socket; with --state-dir: the run's control socket "
                    "(default: found from the state directory)");
    else
      c->add_option("--socket", socket, "the serve daemon's control socket (with a run NAME)");
  };
  auto* status = app.add_subcommand("status", "where a run stands: run state, plus live workers when running");
  run_options(status, true);
  status->add_flag("--json", as_json, "machine-readable output");
  std::vector<CLI::App*> control;
  for (auto [name, help] : {std::pair{"stop", "graceful stop: no new tasks, running ones finish"},
                            std::pair{"pause", "no new tasks until resume (running ones finish)"},
                            std::pair{"resume", "dispatch again after pause"},
                            std::pair{"reload", "re-read the config; safe changes apply at the next round boundary"}}) {
    auto* c = app.add_subcommand(name, help);
    run_options(c, true);
    control.push_back(c);
  }

  auto* predict = app.add_subcommand("predict", "ensemble mean and std per row of a CSV");
  run_options(predict, false);
  predict->add_option("--input,-i", input,
                      "CSV with the run's feature columns (header line); '-': batches on stdin, the header once, "
                      "a blank line after each batch, each answered at once")
      ->required();
  predict->add_option("--output,-o", output, "output CSV (default: stdout)");
  predict->add_option("--round,-r", round,
                      "round whose members predict (default: latest committed; the round being committed, during "
                      "its mutation command)");

  std::string member;
  int sample = 0;
  bool all = false;
  auto* verify = app.add_subcommand("verify", "retrain members alone and compare them bit for bit");
  run_options(verify, false);
  verify->add_option("--round,-r", round, "round (default: latest committed)");
  auto* only = verify->add_option("--member,-m", member, "just this member");
  auto* some = verify->add_option("--sample", sample, "this many members, chosen repeatably")->excludes(only);
  verify->add_flag("--all", all, "every member of the round (the default)")->excludes(only)->excludes(some);

  std::string export_file;
  auto* export_cmd =
      app.add_subcommand("export", "one TorchScript file of a round's members: forward(x) -> (mean, std)");
  run_options(export_cmd, false);
  export_cmd->add_option("--round,-r", round, "round whose members are exported (default: latest committed)");
  export_cmd->add_option("--output,-o", export_file, "TorchScript file to write (e.g. ensemble.pt)")->required();

  std::string file, run_name;
  int priority = 0;
  auto* submit = app.add_subcommand("submit", "queue a run config on an `ensembled serve` daemon");
  submit->add_option("--socket", socket, "the daemon's control socket")->required();
  submit->add_option("file", file, "run config file")->required();
  submit->add_option("--priority", priority, "higher starts first (default 0)");
  auto* list = app.add_subcommand("list", "every run of an `ensembled serve` daemon");
  list->add_option("--socket", socket, "the daemon's control socket")->required();
  list->add_flag("--json", as_json, "machine-readable output: {\"runs\": [...]}");
  auto* cancel = app.add_subcommand("cancel", "stop a queued or running run of an `ensembled serve` daemon");
  cancel->add_option("--socket", socket, "the daemon's control socket")->required();
  cancel->add_option("name", run_name, "run_name of the run")->required();

  auto* validate = app.add_subcommand("validate-config", "check a config; print every error");
  validate->add_option("config", config, "config file")->required();
  CLI11_PARSE(app, argc, argv);

  if (*submit) return ens::ctl::Submit(socket, file, priority);
  if (*list) return ens::ctl::ListRuns(socket, as_json);
  if (*cancel) return ens::ctl::CancelRun(socket, run_name);
  CLI::App* per_run = app.get_subcommands().front();
  if (per_run != validate) {
    if (state_dir.empty() == served.empty()) {
      std::cerr << "ensemblectl " << per_run->get_name() << ": give the run's --state-dir, or its NAME and the serve daemon's --socket\n";
      return ens::exit_code::kUsage;
    }
    if (!served.empty() && socket.empty()) {
      std::cerr << "ensemblectl " << per_run->get_name() << ": run " << served << ": --socket (the serve daemon's) is required with a run name\n";
      return ens::exit_code::kUsage;
    }
  }
  if (*status && !served.empty()) {
    int code = 0;
    auto reply = ens::ctl::AskServedRun(socket, served, "status", "status", &code);
    if (!reply) return code;
    return ens::ctl::ShowStatus((*reply)["run"].value("state_dir", ""), "", as_json, &*reply);
  }
  if (*status) return ens::ctl::ShowStatus(state_dir, socket, as_json);
  for (auto* c : control) {
    if (!*c) continue;
    if (!served.empty()) return ens::ctl::ServedRunAction(socket, served, c->get_name());
    return ens::ctl::Control(state_dir, socket, c->get_name());
  }
  if (!served.empty()) {
    int code = 0;
    state_dir = ens::ctl::StateDirOf(state_dir, socket, served, per_run->get_name(), &code);
    if (state_dir.empty()) return code;
  }
  if (*predict) return ens::ctl::Predict(state_dir, round, input, output);
  if (*verify) return ens::ctl::Verify(state_dir, round, member, sample);
  if (*export_cmd) return ens::ctl::Export(state_dir, round, export_file);
  return ens::ctl::ValidateConfig(config);
}
