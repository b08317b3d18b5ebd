// ServeConfig: the config of `ensembled serve`, the daemon that runs many runs (configs/serve.json
// documents it for users).
//
// Read with the run config's reader (common/config/config_validator.h): every problem reported as
// "<JSON pointer>: <message>", unknown keys are errors, "service" has the run config's keys and
// rules. Plain data. Thread-compatible.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/base/status.h"

namespace ens {

// What the daemon hands out to its runs.
struct ServeResources {
  // "auto" (every GPU this process may use) | "none" | a count (the first N usable GPUs) | a
  // list of physical indices or UUIDs (common/config/gpu_selection.h). Default: "auto"
  GpuSelection gpus;
  int cpu_workers = 2;  // CPU worker slots shared by the runs that use no GPU, >= 1. Default: 2
};

// Whether and how a waiting run stops lower-priority running runs to get its ask
// (orchestrator/serve/run_queue.h PreemptFor).
struct PreemptionSpec {
  bool enabled = false;      // Default: false (priorities only order the queue)
  int min_priority_gap = 1;  // only runs at least this far below are preempted, >= 1. Default: 1
  // How long a preempted run's running members may go on finishing after its SIGTERM before
  // the run is killed (what they had not finished is trained again when it resumes), > 0.
  // Default: 60
  double grace_s = 60;
};

// The bounds of a run's priority (submit --priority): every limit lies within them.
inline constexpr int kPriorityBound = 1000;

// What one submitter may ask of the daemon (docs/security.md "Policy"); a submission over a
// limit is refused, naming it. Root and the members of admins_group are administrators.
struct SubmitterLimits {
  int min_priority = -100;  // the lowest priority anyone may ask. Default: -100
  int max_priority = 10;    // the highest a submitter may ask. Default: 10
  int admin_max_priority = kPriorityBound;  // the highest an administrator may ask. Default: 1000
  std::string admins_group;  // its members are administrators. Default: "" (root only)
  // Per submitter (uid), over its queued and running runs together; 0: no limit. Default: 0
  int runs = 0;         // runs
  int gpus = 0;         // GPUs asked (a count, or the GPUs named)
  int cpu_workers = 0;  // CPU worker slots asked
};

// Config "run_as", by its names in kRunAsNames (Name and Parse of member_options.h).
enum class RunAs { kDaemon, kSubmitter };
inline constexpr std::string_view kRunAsNames[] = {"daemon", "submitter"};
constexpr std::span<const std::string_view> NamesOf(RunAs) { return kRunAsNames; }

struct ServeConfig {
  std::string runs_dir;    // REQUIRED: every *.json here is a run config (relative: to the config file)
  std::string state_root;  // REQUIRED: a run without state_dir gets state_root/<run_name>
  ServeResources resources;
  PreemptionSpec preemption;
  // Who each run's processes run as (orchestrator/serve/run_as.h, docs/run-as.md): "daemon" (the
  // daemon's user) | "submitter" (the uid that submitted it, with its groups). Default: "daemon"
  RunAs run_as = RunAs::kDaemon;
  bool allow_root = false;       // run_as "submitter": uid 0 may submit. Default: false
  std::string submitters_group;  // run_as "submitter": who may submit. Default: "" (the daemon's group)
  std::string state_dir_mode = "0750";  // run_as "submitter": of each run's state directory. Default: "0750"
  SubmitterLimits limits;
  // A file holding the token (its first line) that HTTP clients send as "Authorization: Bearer
  // <token>" to see a run's page (/runs/NAME). Default: "" (no token: a run's page is served to
  // anyone under run_as "daemon", to no one under "submitter": `ensemblectl status` is the way)
  std::string http_token_file;
  // control_socket "" = $RUNTIME_DIRECTORY/ensembled-serve.sock under systemd, else
  // <state_root>/.serve/control.sock; the other keys as a run's (config.h).
  ServiceSpec service;
};

// Every error, each as {pointer, message}; empty when valid (then *out is filled).
std::vector<ConfigError> ValidateServeConfigText(const std::string& text, const std::string& base_dir,
                                                 ServeConfig* out);
// Reads and validates a file; InvalidArgument lists every "<file>: <pointer>: <message>".
StatusOr<ServeConfig> LoadServeConfigFile(const std::string& path);

// Where the daemon keeps its own files: <state_root>/.serve (ServeLayout, serve_layout.h: the
// queue journal, the runs' effective configs and logs, the default control socket). No run may
// have it as its state directory.
std::string ServeStateDir(const ServeConfig& c);
// The control socket the daemon listens on (service.control_socket or its default).
std::string ServeControlSocket(const ServeConfig& c);

}  // namespace ens
