// ensemblectl: the operator's tool. It reads the run state directly and runs
// ensemble-worker for anything that needs libtorch, so it never loads libtorch itself.
#include <algorithm>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/base/atomic_file.h"
#include "common/config/config.h"
#include "common/data/data_source.h"
#include "common/base/exit_codes.h"
#include "common/config/run_head.h"
#include "common/ipc/control_protocol.h"
#include "ctl/commands.h"
#include "common/config/served_run_config.h"
#include "common/config/script_model_check.h"

namespace ens::ctl {

// The columns (features, targets) of the config's training data, from the synthetic count or
// the file's header (a CSV is opened, an npy pair's headers read; no row is kept).
StatusOr<Table> DataColumns(const DataSpec& d) {
  auto files = OpenDataFiles(d, /*run_seed=*/0, /*train_labels=*/nullptr, /*labels=*/nullptr);
  if (!files.ok()) return files.status();
  return files->train->columns();
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
  return CheckScriptModels(cfg.members, columns->features, RunHead::For(cfg, 0, columns->targets).OutputWidth(), WorkerBinary());
}

int ValidateConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    std::cerr << text.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  Config cfg;
  auto errors = ValidateConfigText(*text, ParentDir(path), &cfg);
  // A config for `ensembled serve` has no state_dir (the daemon gives it <state_root>/<run_name>):
  // checked as submit checks it, as a served run.
  const bool served = std::any_of(errors.begin(), errors.end(), [](const ConfigError& e) {
    return e.pointer == "/state_dir" && e.message == "is required";
  });
  if (served) errors = ValidateServedRunConfig(*text, ParentDir(path), "<state_root>", &cfg);
  if (errors.empty()) errors = CheckAgainstData(cfg);
  for (const auto& e : errors) std::cout << path << ": " << (e.pointer.empty() ? "/" : e.pointer) << ": " << e.message << "\n";
  if (!errors.empty()) return exit_code::kPermanentFailure;
  std::cout << path << ": ok (" << cfg.members.size() << " members, " << cfg.rounds.count << " rounds, mutation "
            << Name(cfg.mutation.policy) << (served ? "; for `ensembled serve`: no state_dir, the daemon gives it "
                                                      "<state_root>/" + cfg.run_name
                                                    : std::string()) << ")\n";
  return exit_code::kOk;
}

namespace {

// The command line's values (CLI11 writes them during the parse).
struct CtlOptions {
  std::string state_dir;     // a per-run command's --state-dir
  std::string served;        // a run of `ensembled serve`, by name (with the daemon's --socket)
  std::string socket;        // the serve daemon's control socket, or the run's with --state-dir
  bool as_json = false;      // status, list: machine-readable output
  int round = -1;            // predict, verify, export: the round (-1: the latest committed)
  std::string input;         // predict: the input CSV ('-': batches on stdin)
  std::string output = "-";  // predict: the output CSV ('-': stdout)
  std::string member;        // verify: just this member; export: this member's own module
  int sample = 0;            // verify: this many members, chosen repeatably
  bool all = false;          // verify: every member (the default)
  std::string export_file;   // export: the TorchScript file to write
  bool raw_sigma = false;    // predict, export: the raw spread, not the calibrated std
  std::string file;          // submit: the run config file
  int priority = 0;          // submit: higher starts first
  std::string run_name;      // cancel: the run
  std::string config;        // validate-config: the config file
};

// The subcommands, to tell after the parse which one was given.
struct CtlCommands {
  CLI::App* status = nullptr;
  std::vector<CLI::App*> control;  // the table's kAction rows: stop | pause | resume | reload
  CLI::App *predict = nullptr, *verify = nullptr, *export_cmd = nullptr;  // on a round's members
  CLI::App *submit = nullptr, *list = nullptr, *cancel = nullptr;         // on the serve daemon's queue
  CLI::App* validate = nullptr;
};

// A per-run command names its run by --state-dir, or by NAME with the serve daemon's --socket.
void AddRunOptions(CLI::App* c, CtlOptions* o, bool has_socket) {
  auto* dir = c->add_option("--state-dir,-s", o->state_dir, "the run's state directory");
  auto* name = c->add_option("run", o->served, "a run of `ensembled serve`, by name (with the daemon's --socket)");
  dir->excludes(name);
  name->excludes(dir);
  if (has_socket)
    c->add_option("--socket", o->socket,
                  "with a run NAME: the serve daemon's socket; with --state-dir: the run's control socket "
                  "(default: found from the state directory)");
  else
    c->add_option("--socket", o->socket, "the serve daemon's control socket (with a run NAME)");
}

// The help of a command with a row in the control protocol's table (its `what`).
const char* HelpOf(ControlCommand c) { return InfoOf(c).what; }

// status, and every kAction row of the control protocol's table (stop, pause, resume, reload,
// and any command added there): what a running supervisor is asked over its socket.
void AddRunControlCommands(CLI::App& app, CtlOptions* o, CtlCommands* cmds) {
  cmds->status = app.add_subcommand("status", HelpOf(ControlCommand::kStatus));
  AddRunOptions(cmds->status, o, true);
  cmds->status->add_flag("--json", o->as_json, "machine-readable output");
  for (const ControlCommandInfo& row : kControlCommands) {
    if (row.ctl != CtlForm::kAction) continue;
    auto* c = app.add_subcommand(row.name, row.what);
    AddRunOptions(c, o, true);
    cmds->control.push_back(c);
  }
}

// predict, verify and export: what runs a round's members (through ensemble-worker).
void AddMemberCommands(CLI::App& app, CtlOptions* o, CtlCommands* cmds) {
  cmds->predict = app.add_subcommand("predict", "ensemble mean and std per row of a CSV");
  AddRunOptions(cmds->predict, o, false);
  cmds->predict
      ->add_option("--input,-i", o->input,
                   "CSV with the run's feature columns (header line); '-': batches on stdin, the header once, "
                   "a blank line after each batch, each answered at once")
      ->required();
  cmds->predict->add_option("--output,-o", o->output, "output CSV (default: stdout)");
  cmds->predict->add_flag("--raw-sigma", o->raw_sigma,
                          "the members' own spread (and mean probabilities), not the round's calibration");
  cmds->predict->add_option("--round,-r", o->round,
                            "round whose members predict (default: latest committed; the round being committed, "
                            "during its mutation command)");

  cmds->verify = app.add_subcommand("verify", "retrain members alone and compare them bit for bit");
  AddRunOptions(cmds->verify, o, false);
  cmds->verify->add_option("--round,-r", o->round, "round (default: latest committed)");
  auto* only = cmds->verify->add_option("--member,-m", o->member, "just this member");
  auto* some = cmds->verify->add_option("--sample", o->sample, "this many members, chosen repeatably")->excludes(only);
  cmds->verify->add_flag("--all", o->all, "every member of the round (the default)")->excludes(only)->excludes(some);

  cmds->export_cmd =
      app.add_subcommand("export", "one TorchScript file of a round's members: forward(x) -> (mean, std)");
  AddRunOptions(cmds->export_cmd, o, false);
  cmds->export_cmd->add_option("--round,-r", o->round, "round whose members are exported (default: latest committed)");
  cmds->export_cmd->add_option("--output,-o", o->export_file, "TorchScript file to write (e.g. ensemble.pt)")
      ->required();
  auto* raw = cmds->export_cmd->add_flag("--raw-sigma", o->raw_sigma, "the members' own spread, not the round's calibrated std");
  cmds->export_cmd->add_option("--member,-m", o->member,
                               "this member's own module instead: forward(x) -> its predictions (what checkpoint.pt held)")
      ->excludes(raw);
}

// submit, list and cancel (an `ensembled serve` daemon's queue), and validate-config.
void AddQueueCommands(CLI::App& app, CtlOptions* o, CtlCommands* cmds) {
  cmds->submit = app.add_subcommand("submit", HelpOf(ControlCommand::kSubmit));
  cmds->submit->add_option("--socket", o->socket, "the daemon's control socket")->required();
  cmds->submit->add_option("file", o->file, "run config file")->required();
  cmds->submit->add_option("--priority", o->priority, "higher starts first (default 0)");
  cmds->list = app.add_subcommand("list", HelpOf(ControlCommand::kList));
  cmds->list->add_option("--socket", o->socket, "the daemon's control socket")->required();
  cmds->list->add_flag("--json", o->as_json, "machine-readable output: {\"runs\": [...]}");
  cmds->cancel = app.add_subcommand("cancel", HelpOf(ControlCommand::kCancel));
  cmds->cancel->add_option("--socket", o->socket, "the daemon's control socket")->required();
  cmds->cancel->add_option("name", o->run_name, "run_name of the run")->required();

  cmds->validate = app.add_subcommand("validate-config", "check a config; print every error");
  cmds->validate->add_option("config", o->config, "config file")->required();
}

// Runs the subcommand the parse found; its exit code. A per-run command needs either
// --state-dir or a run NAME with the serve daemon's --socket (kUsage otherwise).
int RunCommand(CLI::App& app, const CtlCommands& cmds, CtlOptions& o) {
  if (*cmds.submit) return Submit(o.socket, o.file, o.priority);
  if (*cmds.list) return ListRuns(o.socket, o.as_json);
  if (*cmds.cancel) return CancelRun(o.socket, o.run_name);
  CLI::App* per_run = app.get_subcommands().front();
  if (per_run != cmds.validate) {
    if (o.state_dir.empty() == o.served.empty()) {
      std::cerr << "ensemblectl " << per_run->get_name() << ": give the run's --state-dir, or its NAME and the serve daemon's --socket\n";
      return exit_code::kUsage;
    }
    if (!o.served.empty() && o.socket.empty()) {
      std::cerr << "ensemblectl " << per_run->get_name() << ": run " << o.served << ": --socket (the serve daemon's) is required with a run name\n";
      return exit_code::kUsage;
    }
  }
  if (*cmds.status && !o.served.empty()) {
    int code = 0;
    auto reply = AskServedRun(o.socket, o.served, "status", "status", &code);
    if (!reply) return code;
    return ShowStatus((*reply)["run"].value("state_dir", ""), "", o.as_json, &*reply);
  }
  if (*cmds.status) return ShowStatus(o.state_dir, o.socket, o.as_json);
  for (auto* c : cmds.control) {
    if (!*c) continue;
    if (!o.served.empty()) return ServedRunAction(o.socket, o.served, c->get_name());
    return Control(o.state_dir, o.socket, c->get_name());
  }
  if (!o.served.empty()) {
    int code = 0;
    o.state_dir = StateDirOf(o.state_dir, o.socket, o.served, per_run->get_name(), &code);
    if (o.state_dir.empty()) return code;
  }
  if (*cmds.predict) return Predict(o.state_dir, o.round, o.input, o.output, o.raw_sigma);
  if (*cmds.verify) return Verify(o.state_dir, o.round, o.member, o.sample);
  if (*cmds.export_cmd && !o.member.empty()) return ExportMember(o.state_dir, o.round, o.member, o.export_file);
  if (*cmds.export_cmd) return Export(o.state_dir, o.round, o.export_file, o.raw_sigma);
  return ValidateConfig(o.config);
}

}  // namespace

}  // namespace ens::ctl

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a program run with pipes (a command member's predict_argv) may close its end
  CLI::App app{"ensemblectl: inspect and use an ensembled run"};
  app.require_subcommand(1);
  ens::ctl::CtlOptions options;
  ens::ctl::CtlCommands commands;
  ens::ctl::AddRunControlCommands(app, &options, &commands);
  ens::ctl::AddMemberCommands(app, &options, &commands);
  ens::ctl::AddQueueCommands(app, &options, &commands);
  CLI11_PARSE(app, argc, argv);
  return ens::ctl::RunCommand(app, commands, options);
}
