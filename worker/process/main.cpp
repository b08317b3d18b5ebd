// ensemble-worker: trains member tasks for the supervisor; also the libtorch side of
// `ensemblectl predict` and `ensemblectl verify`.
//
//   ensemble-worker serve --run-id ID --slot N   serve tasks from the supervisor (its channel on
//                                                descriptor 3, WorkerChannel) until shutdown
//   ensemble-worker train-one --task FILE...     run tasks (JSON TaskSpec) in order, then exit
//   ensemble-worker predict --input F32 --features N --output F32 CHECKPOINT...
//   ensemble-worker predict --stream --features N CHECKPOINT...   batches on stdin/stdout (predictor.h)
//   ensemble-worker compare A B                  bitwise checkpoint comparison, JSON on stdout
//   ensemble-worker member-module --output F C   one member's TorchScript module (its checkpoint's)
//   ensemble-worker export --output F CHECKPOINT...   one TorchScript module: (mean, std) of members
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <optional>

#include "common/base/atomic_file.h"
#include "common/base/cublas_workspace.h"
#include "common/base/env.h"
#include "common/base/exit_codes.h"
#include "common/base/fault_injection.h"
#include "common/base/logging.h"
#include "common/state/member_result.h"
#include "common/ipc/protocol.h"
#include "common/config/recycle_policy.h"
#include "common/ipc/supervisor_link.h"
#include "common/ipc/worker_channel.h"
#include "worker/device/cuda_support.h"
#include "worker/device/device_runtime.h"
#include "worker/predict/predictor.h"
#include "worker/process/task_runner.h"
#include "worker/train/trainer.h"

namespace ens {
namespace {

std::string current_member;  // tags log lines while a task runs

// Workers log to the stderr they share with the supervisor (journald under systemd), tagged
// with slot, pid and member so interleaved lines stay attributable.
void Log(int slot, const std::string& what, bool warning = true) {
  if (UnderJournald()) std::cerr << (warning ? "<4>" : "<6>");
  std::cerr << "[worker slot=" << slot << " pid=" << ::getpid();
  if (!current_member.empty()) std::cerr << " member=" << current_member;
  std::cerr << "] " << what << std::endl;
}

Status SendReport(WorkerChannel& c, const Message& m, int timeout_ms) {
  return c.Send(EncodeMessage(m), timeout_ms);
}

// The worker's CUDA caching allocator reservation in KiB (0 on the CPU, or before Init).
int64_t GpuReservedKb(DeviceRuntime& rt) {
  if (!rt.accelerated()) return 0;
  auto stats = rt.Stats();
  return stats.ok() ? stats->reserved / 1024 : 0;
}

// The cache policy (task_runner.h) from the recycle limit: a worker whose reservation nears the
// limit at which it would be recycled first hands its cached blocks back; without a limit the
// cache is kept for the next task.
CachePolicy CachePolicyFor(const RecycleSpec& recycle) {
  return {recycle.gpu_reserved_mb > 0 ? static_cast<int64_t>(recycle.gpu_reserved_mb * 1048576.0 * 0.75) : 0};
}

// `ensemble-worker serve`'s settings: its command line, and what main found of the GPU before
// libtorch loaded.
struct WorkerServeOptions {
  std::string run_id;                 // the run served: on the command line only, for ps to show
  int channel_fd = kWorkerChannelFd;  // the supervisor's channel, inherited (a local worker)
  // host:port of the supervisor: the worker connects back over TCP instead (a Slurm pilot job;
  // common/ipc/supervisor_link.h). Empty: channel_fd.
  std::string connect;
  std::string token_hex;    // with connect: the spawn token to present, 16 hex digits
  std::string secret_file;  // with connect: the run's secret, in its state directory
  int slot = 0;             // the worker slot: in every message and log line
  RecycleSpec recycle;      // when to exit cleanly to be replaced (recycle_policy.h)
  int heartbeat_ms = 1000;  // at most one heartbeat per this many ms while busy
  // Whether this worker can work where it was placed (cuda_support.h); when not, it says so
  // instead of ready and exits 78.
  Status placement;
};

// Opens the link to the supervisor: the channel at channel_fd or, when `connect` is set, a TCP
// connection back proven with the spawn token and the run's secret. kOk with *link open, else
// the exit code (the reason logged).
int OpenLink(const WorkerServeOptions& o, StatusOr<WorkerChannel>* link) {
  if (!o.connect.empty()) {
    auto token = ParseTokenHex(o.token_hex);
    if (!token) {
      Log(o.slot, "--token must be 16 hex digits");
      return exit_code::kUsage;
    }
    *link = ConnectToSupervisor(o.connect, *token, o.secret_file, 60);
    if (!link->ok()) {
      Log(o.slot, link->status().ToString());
      // A node that cannot see the run's files, or a supervisor that refuses us: no retry helps.
      const auto code = link->status().code();
      return code == Status::Code::kNotFound || code == Status::Code::kInvalidArgument ? exit_code::kPermanentFailure
                                                                                       : exit_code::kTransientFailure;
    }
  } else {
    *link = WorkerChannel::Adopt(o.channel_fd);
  }
  if (!link->ok()) {
    Log(o.slot, link->status().ToString());
    return exit_code::kUsage;
  }
  return exit_code::kOk;
}

// Tells the supervisor whether this worker can work: ready, or unusable (where it was placed,
// or libtorch cannot use the GPU the driver sees). kOk once ready is sent, else the exit code.
int Announce(WorkerChannel& link, const WorkerServeOptions& o, DeviceRuntime& runtime) {
  const int64_t pid = ::getpid();
  Status usable = o.placement;
  if (usable.ok()) {
    ConfigureTorchForDeterminism();
    // The driver sees the GPU; libtorch must be able to use it too, or this worker would train
    // on the CPU while the run believes it has a GPU. CUDA is initialised here, once, before
    // anything asks its allocator (device_runtime.h).
    if (Status init = runtime.Init(); !init.ok()) {
      const char* given = std::getenv("CUDA_VISIBLE_DEVICES");
      usable = Status::InvalidArgument(std::string("given GPU ") + (given != nullptr ? given : "(any)") +
                                       ", which the CUDA driver sees, but " + init.message());
    }
  }
  if (!usable.ok()) {
    Log(o.slot, usable.message());
    Message m;
    m.type = MessageType::kUnusable;
    m.slot = o.slot;
    m.pid = pid;
    m.error = usable.message().substr(0, 3000);
    (void)SendReport(link, m, 10000);  // best effort: the pool reads exit 78 before ready as unusable too
    return exit_code::kPermanentFailure;
  }
  // A GPU worker says once how its lane packs will train (the CUDA lane kernel, or PackStep and why).
  if (runtime.accelerated()) {
    if (runtime.lanes() != nullptr) Log(o.slot, "lane packs train with the CUDA lane kernel (libens_lane_cuda.so)");
    else Log(o.slot, runtime.lanes_note());
  }
  Message ready;
  ready.type = MessageType::kReady;
  ready.slot = o.slot;
  ready.pid = pid;
  ready.rss_kb = CurrentRssKb();
  if (Status s = SendReport(link, ready, 10000); !s.ok()) {
    Log(o.slot, s.ToString());
    return exit_code::kTransientFailure;
  }
  return exit_code::kOk;
}

// The tasks a task or pack message asks for; false (logged) when there is nothing to run: a pack
// file that cannot be read (nothing to report against: the supervisor times the slot out), or
// another type of message.
bool TasksOf(const Message& msg, int slot, std::vector<TaskSpec>* tasks) {
  if (msg.type == MessageType::kTask) {
    tasks->push_back(msg.task);
    return true;
  }
  if (msg.type == MessageType::kPack) {
    auto text = ReadFile(msg.pack_file);
    auto parsed = text.ok() ? ParsePackFile(*text, msg.pack_file) : StatusOr<std::vector<TaskSpec>>(text.status());
    if (!parsed.ok()) {
      Log(slot, "rejected pack: " + parsed.status().message());
      return false;
    }
    *tasks = std::move(*parsed);
    return true;
  }
  Log(slot, std::string("ignored message of type ") + MessageTypeName(msg.type));
  return false;
}

// Sends one report per task, in order, the last with the recycle decision (recycle_reason
// non-empty: recycle). The exit code when the worker ends here (a report it cannot send, or
// recycling); nullopt: serve on.
std::optional<int> SendReports(WorkerChannel& link, int slot, const std::vector<TaskSpec>& tasks,
                               const std::vector<TaskOutcome>& outcomes, int64_t gpu_reserved_kb,
                               const std::string& recycle_reason) {
  const int64_t pid = ::getpid();
  Message rep;
  for (size_t k = 0; k < tasks.size(); ++k) {
    const TaskOutcome& outcome = outcomes[k];
    rep = Message();
    rep.slot = slot;
    rep.pid = pid;
    rep.task_id = tasks[k].task_id;
    if (outcome.status.ok()) {
      rep.type = MessageType::kDone;
      // The member's headline numbers (the rest are in its metrics.json): only keys it has,
      // so the report never carries a value the metrics lack.
      rep.metrics = {{"gpu_reserved_mb", static_cast<double>(gpu_reserved_kb) / 1024.0}};
      for (const char* key : {"holdout_rmse", "holdout_accuracy", "epochs_run", "seconds", "rss_kb_after"})
        if (outcome.metrics.contains(key)) rep.metrics[key] = outcome.metrics.at(key);
    } else {
      rep.type = MessageType::kFailed;
      rep.error = outcome.status.message().substr(0, 3000);
      rep.permanent = outcome.permanent;
      Log(slot, "task " + tasks[k].task_id + " failed: " + outcome.status.message());
    }
    if (k + 1 == tasks.size()) {  // the last report of the task carries the recycle decision
      rep.recycle_reason = recycle_reason;
      rep.recycle = !recycle_reason.empty();
    }
    current_member.clear();
    if (Status s = SendReport(link, rep, 60000); !s.ok()) {
      Log(slot, s.ToString());
      return exit_code::kTransientFailure;
    }
  }
  if (rep.recycle) {
    Log(slot, "recycling: " + rep.recycle_reason, false);
    return exit_code::kWorkerRecycle;
  }
  return std::nullopt;
}

// Runs one message's tasks as a pack, beating while it moves, and reports each. The exit code
// when the worker ends after them (a lost device, a report it cannot send, recycling); nullopt:
// serve on.
std::optional<int> RunTasks(WorkerChannel& link, const WorkerServeOptions& o, DeviceRuntime& runtime,
                            TaskRunner& runner, RecyclePolicy& recycle, const std::vector<TaskSpec>& tasks) {
  const int slot = o.slot;
  const int64_t pid = ::getpid();
  current_member = tasks[0].member.name + (tasks.size() > 1 ? "+" + std::to_string(tasks.size() - 1) : "");
  for (const auto& t : tasks) HangIfTold(t.task_id, t.attempt, "");
  for (const auto& t : tasks)
    for (const std::string& raw : RawMessagesRequested(t.task_id, t.attempt, slot, pid)) (void)link.Send(raw, 2000);  // a test's fault: the pool's handling of it is what is tested
  KillIfTooBig(tasks.size());
  // Every phase calls this per member or batch; it sends at most one heartbeat per
  // heartbeat_ms, from this thread: a worker that stops moving stops beating.
  auto last_beat = CurrentEnv().SteadyNow() - std::chrono::hours(1);
  auto beat = [&](TaskPhase phase, int epoch) {
    auto now = CurrentEnv().SteadyNow();
    if (now - last_beat < std::chrono::milliseconds(o.heartbeat_ms)) return;
    last_beat = now;
    Message hb;
    hb.type = MessageType::kHeartbeat;
    hb.slot = slot;
    hb.pid = pid;
    hb.task_id = tasks[0].task_id;
    hb.epoch = epoch;
    hb.phase = phase;
    hb.rss_kb = CurrentRssKb();
    hb.gpu_reserved_kb = GpuReservedKb(runtime);
    (void)SendReport(link, hb, 0);  // a full channel drops a heartbeat, never blocks training
  };
  auto note = [&](const std::string& what) { Log(slot, what, false); };
  std::vector<TaskOutcome> outcomes = runner.RunPack(tasks, beat, note);
  if (!outcomes.empty() && outcomes[0].device_lost) {
    // Nothing more can run in this context: end, unreported; the supervisor retries the
    // tasks as after a crash and a new worker starts with a new context.
    Log(slot, "ending: " + outcomes[0].status.message());
    return exit_code::kDeviceLost;
  }
  const int64_t gpu_reserved_kb = GpuReservedKb(runtime);
  std::string recycle_reason = recycle.AfterTask({CurrentRssKb(), gpu_reserved_kb});
  return SendReports(link, slot, tasks, outcomes, gpu_reserved_kb, recycle_reason);
}

// Serves the supervisor until it says shutdown or goes away (kOk), or the worker must end: the
// exit code.
int Serve(const WorkerServeOptions& o, DeviceRuntime& runtime) {
  StatusOr<WorkerChannel> adopted = Status::Internal("no link");
  if (int code = OpenLink(o, &adopted); code != exit_code::kOk) return code;
  WorkerChannel& link = *adopted;
  if (int code = Announce(link, o, runtime); code != exit_code::kOk) return code;
  TaskRunner runner(&runtime, CachePolicyFor(o.recycle));
  RecyclePolicy recycle(o.recycle);
  for (;;) {
    auto got = link.Receive(-1);
    if (!got.ok()) {  // a message too long to be one of ours: nothing to act on
      Log(o.slot, "rejected message: " + got.status().message());
      continue;
    }
    if (got->kind == WorkerChannel::Received::kClosed) return exit_code::kOk;  // supervisor gone
    if (got->kind == WorkerChannel::Received::kNothing) continue;
    auto msg = DecodeMessage(got->bytes);
    if (!msg.ok()) {
      Log(o.slot, "rejected message: " + msg.status().message());
      continue;
    }
    if (msg->type == MessageType::kShutdown) return exit_code::kOk;
    std::vector<TaskSpec> tasks;
    if (!TasksOf(*msg, o.slot, &tasks)) continue;
    if (std::optional<int> code = RunTasks(link, o, runtime, runner, recycle, tasks)) return *code;
  }
}

// Runs the tasks in order, each alone, in this one process (verify and the reproducibility
// tests use it to show that what a process trained before does not change a member's bits).
int TrainSequence(const std::vector<std::string>& task_files, DeviceRuntime& runtime) {
  ConfigureTorchForDeterminism();
  TaskRunner runner(&runtime);
  for (const auto& task_file : task_files) {
    auto text = ReadFile(task_file);
    if (!text.ok()) {
      std::cerr << text.status().ToString() << "\n";
      return exit_code::kUsage;
    }
    TaskSpec task;
    Status s = TaskFromJson(nlohmann::json::parse(*text, nullptr, false), &task);
    if (!s.ok()) {
      std::cerr << task_file << ": " << s.message() << "\n";
      return exit_code::kUsage;
    }
    TaskOutcome o = runner.Run(task, nullptr);
    if (!o.status.ok()) {
      std::cerr << task_file << ": " << o.status.ToString() << "\n";
      if (o.device_lost) return exit_code::kDeviceLost;
      return o.permanent ? exit_code::kPermanentFailure : exit_code::kTransientFailure;
    }
    std::cout << o.metrics.dump() << "\n";
  }
  return exit_code::kOk;
}

int Predict(const std::string& input, int features, const std::string& output,
            const std::vector<std::string>& checkpoints) {
  auto bytes = ReadFile(input);
  if (!bytes.ok() || features <= 0 || bytes->size() % (sizeof(float) * features) != 0) {
    std::cerr << "predict: bad input " << input << "\n";
    return exit_code::kUsage;
  }
  std::vector<float> rows(bytes->size() / sizeof(float));
  std::memcpy(rows.data(), bytes->data(), bytes->size());
  auto preds = PredictWithCheckpoints(checkpoints, rows, features);
  if (!preds.ok()) {
    std::cerr << preds.status().ToString() << "\n";
    return exit_code::kPermanentFailure;
  }
  std::vector<float> flat;
  for (const auto& p : *preds) flat.insert(flat.end(), p.begin(), p.end());
  Status s = WriteFileAtomic(output, FloatsToBytes(flat));
  if (!s.ok()) {
    std::cerr << s.ToString() << "\n";
    return exit_code::kTransientFailure;
  }
  return exit_code::kOk;
}

int Export(const std::string& output, const std::vector<std::string>& checkpoints, const std::vector<double>& scale,
           const std::vector<double>& noise) {
  Status s = scale.size() == noise.size()
                 ? ExportEnsemble(checkpoints, output, scale, noise)
                 : Status::InvalidArgument("--sigma-scale and --sigma-noise need one value per target each");
  if (!s.ok()) std::cerr << "export: " << s.ToString() << "\n";
  return ExitCodeFor(s);
}

// The command line of the subcommands other than serve.
struct WorkerToolOptions {
  std::vector<std::string> task_files;   // train-one: TaskSpec JSON files, run in order
  std::string input;                     // predict: raw float32 rows
  std::string output;                    // predict: raw float32 [members x rows]; export: the module file
  bool stream = false;                   // predict: batches on stdin/stdout instead of input and output
  int features = 0;                      // predict, check-model: features per row
  std::vector<std::string> checkpoints;  // predict, export: member checkpoint files
  std::string a, b;                      // compare: the two checkpoints (member-module: a)
  std::string model_path;                // check-model: the saved module
  int outputs = 0;                       // check-model: the output width it must have (0: any)
  std::vector<double> sigma_scale, sigma_noise;  // export: the round's calibration per target (none: raw std)
};

// The subcommands, to tell after the parse which one was given.
struct WorkerCommands {
  CLI::App* serve = nullptr;
  CLI::App* train_one = nullptr;
  CLI::App* predict = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* export_cmd = nullptr;
  CLI::App* member_module = nullptr;
  CLI::App* check_model = nullptr;
};

// serve: the supervisor's worker.
void AddServeCommand(CLI::App& app, WorkerServeOptions* o, WorkerCommands* cmds) {
  auto* serve = app.add_subcommand("serve", "serve tasks from the supervisor over the channel it passes");
  serve->add_option("--run-id", o->run_id, "run id (shown by ps: the run this worker serves)")->required();
  serve->add_option("--channel-fd", o->channel_fd, "descriptor of the supervisor's channel")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--connect", o->connect, "host:port of the supervisor (a remote worker connects back over TCP)");
  serve->add_option("--token", o->token_hex, "spawn token (16 hex digits) to present with --connect");
  serve->add_option("--secret-file", o->secret_file, "the run's secret, in its state directory (with --connect)");
  serve->add_option("--slot", o->slot, "worker slot")->required()->check(CLI::NonNegativeNumber);
  serve->add_option("--heartbeat-ms", o->heartbeat_ms, "at most one heartbeat per this many ms while busy")
      ->check(CLI::Range(10, 60000));
  serve->add_option("--recycle-after-tasks", o->recycle.after_tasks, "exit cleanly after this many tasks (0: never)");
  serve->add_option("--recycle-rss-mb", o->recycle.rss_mb, "exit cleanly when RSS passes this (0: off)");
  serve->add_option("--recycle-rss-growth-pct", o->recycle.rss_growth_pct, "exit cleanly when RSS grew this % (0: off)");
  serve->add_option("--recycle-gpu-reserved-mb", o->recycle.gpu_reserved_mb, "exit cleanly past this GPU reserve (0: off)");
  cmds->serve = serve;
}

// train-one, predict, compare, export and check-model: the tools ensemblectl and the tests run.
void AddToolCommands(CLI::App& app, WorkerToolOptions* o, WorkerCommands* cmds) {
  auto* one = app.add_subcommand("train-one", "run tasks from JSON files, in order, in this process");
  one->add_option("--task", o->task_files, "TaskSpec JSON file (repeatable)")->required();
  auto* predict = app.add_subcommand("predict", "predict raw float32 rows with checkpoints");
  auto* stream_flag = predict->add_flag("--stream", o->stream, "answer batches on stdin/stdout until end of input");
  predict->add_option("--input", o->input, "raw float32 rows")->excludes(stream_flag);
  predict->add_option("--features", o->features, "features per row")->required();
  predict->add_option("--output", o->output, "raw float32 [members x rows]")->excludes(stream_flag);
  predict->add_option("checkpoints", o->checkpoints, "checkpoint files")->required();
  auto* compare = app.add_subcommand("compare", "compare two checkpoints bit for bit");
  compare->add_option("a", o->a)->required();
  compare->add_option("b", o->b)->required();
  auto* exp = app.add_subcommand("export", "write one TorchScript module of the members: forward(x) -> (mean, std)");
  exp->add_option("--output", o->output, "the module file to write")->required();
  exp->add_option("--sigma-scale", o->sigma_scale, "per target: the calibration's scale of the std (sigma_calibration.h)")
      ->delimiter(',')
      ->allow_extra_args(false);
  exp->add_option("--sigma-noise", o->sigma_noise, "per target: the calibration's noise floor of the std")
      ->delimiter(',')
      ->allow_extra_args(false);
  exp->add_option("checkpoints", o->checkpoints, "member checkpoint files")->required();
  auto* member = app.add_subcommand("member-module", "write one member's TorchScript module: forward(x) -> predictions");
  member->add_option("--output", o->output, "the module file to write")->required();
  member->add_option("checkpoint", o->a, "the member's checkpoint (weights.bin, checkpoint.pt) or directory")->required();
  cmds->member_module = member;
  auto* check = app.add_subcommand("check-model", "load a TorchScript member's module and run it on a zero batch");
  check->add_option("--path", o->model_path, "the saved module")->required();
  check->add_option("--features", o->features, "features per row")->required()->check(CLI::PositiveNumber);
  check->add_option("--outputs", o->outputs, "the output width it must have (0: any)")->check(CLI::NonNegativeNumber);
  cmds->train_one = one;
  cmds->predict = predict;
  cmds->compare = compare;
  cmds->export_cmd = exp;
  cmds->check_model = check;
}

// check-model, on the CPU (a shape check needs no GPU): "ok <width>", or why not, on stdout
// (the caller quotes it at the config's pointer).
int CheckModel(const WorkerToolOptions& o) {
  auto width = CheckUserModel(o.model_path, o.features, o.outputs);
  if (!width.ok()) {
    std::cout << width.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  std::cout << "ok " << *width << "\n";
  return exit_code::kOk;
}

// predict, export and compare: the subcommands that work on checkpoint files.
int RunCheckpointTool(const WorkerCommands& cmds, const WorkerToolOptions& o) {
  ComputeOnOneThread();
  if (*cmds.export_cmd) return Export(o.output, o.checkpoints, o.sigma_scale, o.sigma_noise);
  if (*cmds.member_module) {
    Status s = WriteMemberModule(o.a, o.output);
    if (!s.ok()) std::cerr << "member-module: " << s.ToString() << "\n";
    return ExitCodeFor(s);
  }
  if (*cmds.predict && o.stream) {
    Status s = PredictStream(o.checkpoints, o.features, 0, 1);
    if (!s.ok()) std::cerr << s.ToString() << "\n";
    return s.ok() ? exit_code::kOk : exit_code::kPermanentFailure;
  }
  if (*cmds.predict && (o.input.empty() || o.output.empty())) {
    std::cerr << "predict: --input and --output are required without --stream\n";
    return exit_code::kUsage;
  }
  if (*cmds.predict) return Predict(o.input, o.features, o.output, o.checkpoints);
  auto r = CompareCheckpoints(o.a, o.b);
  if (!r.ok()) {
    std::cerr << r.status().ToString() << "\n";
    return exit_code::kPermanentFailure;
  }
  std::cout << r->dump() << "\n";
  return (*r)["equal"].get<bool>() ? 0 : exit_code::kVerifyMismatch;
}

}  // namespace
}  // namespace ens

int main(int argc, char** argv) {
  CLI::App app{"ensemble-worker: trains ensemble members for ensembled"};
  app.require_subcommand(1);
  ens::WorkerServeOptions serve_options;
  ens::WorkerToolOptions tool_options;
  ens::WorkerCommands cmds;
  ens::AddServeCommand(app, &serve_options, &cmds);
  ens::AddToolCommands(app, &tool_options, &cmds);
  CLI11_PARSE(app, argc, argv);

  if (*cmds.check_model) return ens::CheckModel(tool_options);

  // Before CUDA starts: a worker run by hand gets the workspace setting the supervisor gives.
  (void)ens::EnsureCublasWorkspaceConfig();
  // Before any libtorch call: the CUDA backend registers itself while it loads.
  const ens::CudaSupportResult cuda = ens::LoadCudaSupport();
  ens::Status gpu = ens::RequireCudaSupport(cuda);
  if (gpu.ok() && *cmds.serve) gpu = ens::CheckAssignedGpu();  // a worker never trains on a GPU it lacks
  if (!gpu.ok() && !*cmds.serve) {
    std::cerr << gpu.message() << std::endl;
    return ens::exit_code::kPermanentFailure;
  }

  // A GPU slot trains on its GPU; a worker run by hand (CUDA_VISIBLE_DEVICES unset) where CUDA
  // can be used; a CPU slot, and a GPU slot that the test hook fakes on a machine without one,
  // on the CPU.
  const bool faked_gpu = ens::CudaSeesRequested().has_value();
  const ens::DeviceChoice choice =
      cuda.state != ens::CudaSupport::kLoaded || faked_gpu ? ens::DeviceChoice::kCpu
      : ens::IsGpuSlot()                                   ? ens::DeviceChoice::kGpu
                                                           : ens::DeviceChoice::kGpuIfAvailable;

  // The supervisor forwards signals; a worker dies with the default action.
  if (*cmds.serve || *cmds.train_one) {
    std::unique_ptr<ens::DeviceRuntime> runtime = ens::NewDeviceRuntime(choice);
    if (*cmds.train_one) return ens::TrainSequence(tool_options.task_files, *runtime);
    serve_options.placement = gpu;
    return ens::Serve(serve_options, *runtime);
  }
  return ens::RunCheckpointTool(cmds, tool_options);
}
