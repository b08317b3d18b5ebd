#include "orchestrator/serve/serve_config.h"

#include <cerrno>
#include <climits>
#include <filesystem>

#include "common/base/atomic_file.h"
#include "common/config/config_validator.h"
#include "common/ipc/control_client.h"
#include "orchestrator/serve/run_as.h"
#include "orchestrator/serve/serve_layout.h"

namespace ens {
namespace {

using namespace config_detail;

// The serve config's keys. Change rules do not apply (a serve config is read once, at start).
const ConfigKey kResourceKeys[] = {{"gpus", ChangeRule::kRestart, {}}, {"cpu_workers", ChangeRule::kRestart, {}}};
const ConfigKey kPreemptionKeys[] = {{"enabled", ChangeRule::kRestart, {}},
                                     {"min_priority_gap", ChangeRule::kRestart, {}},
                                     {"grace_s", ChangeRule::kRestart, {}}};
const ConfigKey kLimitKeys[] = {{"min_priority", ChangeRule::kRestart, {}},
                                {"max_priority", ChangeRule::kRestart, {}},
                                {"admin_max_priority", ChangeRule::kRestart, {}},
                                {"admins_group", ChangeRule::kRestart, {}},
                                {"runs", ChangeRule::kRestart, {}},
                                {"gpus", ChangeRule::kRestart, {}},
                                {"cpu_workers", ChangeRule::kRestart, {}}};
const ConfigKey kTopKeys[] = {{"runs_dir", ChangeRule::kRestart, {}},
                              {"state_root", ChangeRule::kRestart, {}},
                              {"resources", ChangeRule::kRestart, kResourceKeys},
                              {"preemption", ChangeRule::kRestart, kPreemptionKeys},
                              {"run_as", ChangeRule::kRestart, {}},
                              {"allow_root", ChangeRule::kRestart, {}},
                              {"submitters_group", ChangeRule::kRestart, {}},
                              {"state_dir_mode", ChangeRule::kRestart, {}},
                              {"limits", ChangeRule::kRestart, kLimitKeys},
                              {"http_token_file", ChangeRule::kRestart, {}},
                              {"service", ChangeRule::kRestart, ConfigKeysOf("/service")}};


void ReadServeResources(Validator& v, const json& root, ServeResources* r) {
  const std::string p = "/resources";
  const json* j = v.Section(root, "", "resources", kResourceKeys);
  if (j == nullptr) return;
  if (const json* g = Find(*j, "gpus"); g != nullptr && g->is_number()) {
    int count = 0;
    if (v.Int(*j, p, "gpus", 1, 4096, &count)) r->gpus = GpuSelection::Count(count);
  } else {
    ReadGpus(v, *j, p, &r->gpus);  // the run config's rules for "auto", "none" and a list
  }
  v.Int(*j, p, "cpu_workers", 1, 4096, &r->cpu_workers);
}

void ReadPreemption(Validator& v, const json& root, PreemptionSpec* p) {
  const std::string ptr = "/preemption";
  const json* j = v.Section(root, "", "preemption", kPreemptionKeys);
  if (j == nullptr) return;
  v.Bool(*j, ptr, "enabled", &p->enabled);
  v.Int(*j, ptr, "min_priority_gap", 1, INT_MAX, &p->min_priority_gap);
  v.Number(*j, ptr, "grace_s", kPositive, &p->grace_s);
}

void ReadLimits(Validator& v, const json& root, SubmitterLimits* l) {
  const std::string p = "/limits";
  const json* j = v.Section(root, "", "limits", kLimitKeys);
  if (j == nullptr) return;
  v.Int(*j, p, "min_priority", -kPriorityBound, kPriorityBound, &l->min_priority);
  v.Int(*j, p, "max_priority", -kPriorityBound, kPriorityBound, &l->max_priority);
  v.Int(*j, p, "admin_max_priority", -kPriorityBound, kPriorityBound, &l->admin_max_priority);
  v.String(*j, p, "admins_group", &l->admins_group, "must be a group name, or \"\" for root alone",
           [](const std::string&) { return true; });
  for (auto [key, out] : {std::pair<const char*, int*>{"runs", &l->runs}, {"gpus", &l->gpus}, {"cpu_workers", &l->cpu_workers}})
    v.Int(*j, p, key, 0, INT_MAX, out);
  if (l->min_priority > l->max_priority) v.Error(p + "/min_priority", "is above max_priority");
  if (l->max_priority > l->admin_max_priority) v.Error(p + "/admin_max_priority", "is below max_priority");
}

}  // namespace

std::vector<ConfigError> ValidateServeConfigText(const std::string& text, const std::string& base_dir,
                                                 ServeConfig* out) {
  Validator v;
  std::vector<ConfigError> fatal;
  std::optional<json> root = ParseDocument(text, v, &fatal);
  if (!root) return fatal;
  ServeConfig c;
  if (v.Object(*root, "", kTopKeys)) {
    for (const char* key : {"runs_dir", "state_root"}) {
      if (!root->contains(key)) v.Error(std::string("/") + key, "is required");
    }
    v.Path(*root, "", "runs_dir", base_dir, &c.runs_dir);
    v.Path(*root, "", "state_root", base_dir, &c.state_root);
    ReadServeResources(v, *root, &c.resources);
    ReadPreemption(v, *root, &c.preemption);
    v.Enum(*root, "", "run_as", &c.run_as);
    v.Bool(*root, "", "allow_root", &c.allow_root);
    v.String(*root, "", "submitters_group", &c.submitters_group, "must be a group name, or \"\" for the daemon's own",
             [](const std::string&) { return true; });
    v.String(*root, "", "state_dir_mode", &c.state_dir_mode,
             "must be an octal mode that gives its owner rwx and no one else write (\"0750\", \"0700\")",
             [](const std::string& m) { return ParseStateDirMode(m).has_value(); });
    ReadLimits(v, *root, &c.limits);
    v.Path(*root, "", "http_token_file", base_dir, &c.http_token_file);
    ReadService(v, *root, base_dir, &c.service);
  }
  if (v.ok() && out != nullptr) *out = std::move(c);
  return v.Take();
}

StatusOr<ServeConfig> LoadServeConfigFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return Status::NotFound("cannot read serve config " + path + ": " + text.status().message());
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  std::string base_dir = (ec ? std::filesystem::path(path) : abs).parent_path().string();
  ServeConfig c;
  std::vector<ConfigError> errors = ValidateServeConfigText(*text, base_dir, &c);
  if (errors.empty()) return c;
  std::string msg;
  for (const ConfigError& e : errors) msg += (msg.empty() ? "" : "\n") + path + ": " + FormatError(e);
  return Status::InvalidArgument(msg);
}

std::string ServeStateDir(const ServeConfig& c) { return ServeLayout(c.state_root).dir(); }

std::string ServeControlSocket(const ServeConfig& c) {
  return ControlSocketPath(c.service.control_socket, "ensembled-serve", ServeStateDir(c));
}

}  // namespace ens
