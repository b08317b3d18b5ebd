#include "orchestrator/config_reload.h"

#include <nlohmann/json.hpp>

namespace ens {
namespace {

using json = nlohmann::json;

json DataJson(const DataSpec& d) {
  return {d.source, d.synthetic_features, d.synthetic_noise, d.initial_rows, d.pool_rows, d.holdout_rows,
          d.train_path, d.pool_path, d.holdout_path, d.feature_columns, d.target_column, d.x_path, d.y_path,
          d.pool_x_path, d.pool_y_path, d.holdout_fraction};
}

json ResourcesJson(const ResourcesSpec& r) {
  return {r.gpus_mode, r.gpu_list, r.workers_per_gpu, r.cpu_workers, r.threads_per_worker};
}

json ServiceJson(const ServiceSpec& s) { return {s.control_socket, s.http_port, s.http_bind, s.log_file}; }

}  // namespace

std::vector<std::string> UnsafeChanges(const Config& a, const Config& b) {
  std::vector<std::string> out;
  if (a.run_name != b.run_name) out.push_back("/run_name");
  if (a.state_dir != b.state_dir) out.push_back("/state_dir");
  if (a.run_seed != b.run_seed) out.push_back("/run_seed");
  if (ResourcesJson(a.resources) != ResourcesJson(b.resources)) out.push_back("/resources");
  if (DataJson(a.data) != DataJson(b.data)) out.push_back("/data");
  if (a.members.size() != b.members.size()) {
    out.push_back("/members");
  } else {
    for (size_t i = 0; i < a.members.size(); ++i)
      if (MemberToJson(a.members[i]) != MemberToJson(b.members[i])) out.push_back("/members (" + a.members[i].name + ")");
  }
  if (a.mutation.policy != b.mutation.policy) out.push_back("/mutation/policy");
  if (a.mutation.argv != b.mutation.argv) out.push_back("/mutation/argv");
  if (a.save_checkpoints != b.save_checkpoints) out.push_back("/save_checkpoints");
  if (a.pack_size != b.pack_size) out.push_back("/pack_size");
  if (ServiceJson(a.service) != ServiceJson(b.service)) out.push_back("/service");
  return out;
}

void ApplySafeChanges(const Config& p, Config* r) {
  r->rounds = p.rounds;
  r->mutation.k = p.mutation.k;
  r->mutation.timeout_s = p.mutation.timeout_s;
  r->heartbeat_timeout_s = p.heartbeat_timeout_s;
  r->max_task_attempts = p.max_task_attempts;
  r->min_members = p.min_members;
  r->stop_timeout_s = p.stop_timeout_s;
  r->recycle = p.recycle;
}

}  // namespace ens
