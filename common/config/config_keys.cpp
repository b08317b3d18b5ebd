#include "common/config/config_keys.h"

#include <cctype>

namespace ens {
namespace {

using R = ChangeRule;
using K = ConfigKey;

constexpr K kLayer[] = {{"units", R::kResults, {}}, {"activation", R::kResults, {}}, {"dropout", R::kResults, {}}};
constexpr K kEarlyStopping[] = {{"enabled", R::kResults, {}},   {"monitor", R::kResults, {}},
                                {"patience", R::kResults, {}},  {"min_delta", R::kResults, {}},
                                {"restore_best", R::kResults, {}}, {"refit", R::kResults, {}}};
constexpr K kModel[] = {{"kind", R::kResults, {}},
                        {"argv", R::kResults, {}},
                        {"timeout_s", R::kResults, {}},
                        {"predict_argv", R::kResults, {}},
                        {"path", R::kResults, {}},
                        {"init", R::kResults, {}}};
constexpr K kMember[] = {
    {"name", R::kResults, {}},         {"layers", R::kResults, kLayer},  {"initializer", R::kResults, {}},
    {"l1", R::kResults, {}},           {"l2", R::kResults, {}},          {"loss", R::kResults, {}},
    {"huber_delta", R::kResults, {}},  {"optimizer", R::kResults, {}},   {"lr", R::kResults, {}},
    {"weight_decay", R::kResults, {}}, {"momentum", R::kResults, {}},    {"epochs", R::kResults, {}},
    {"batch_size", R::kResults, {}},   {"early_stopping", R::kResults, kEarlyStopping},
    {"split", R::kResults, {}},        {"validation_split", R::kResults, {}},
    {"seed_offset", R::kResults, {}},  {"model", R::kResults, kModel}, {"label_smoothing", R::kResults, {}},
    {"warm_start", R::kResults, {}},   {"warm_start_epochs", R::kResults, {}},
    {"adversarial_eps", R::kResults, {}}};
constexpr K kMembers[] = {{"defaults", R::kResults, kMember},
                          {"list", R::kResults, kMember},
                          {"count", R::kResults, {}},
                          {"variants", R::kResults, kMember}};
constexpr K kSynthetic[] = {{"features", R::kResults, {}},   {"noise", R::kResults, {}},
                            {"initial_rows", R::kResults, {}}, {"pool_rows", R::kResults, {}},
                            {"holdout_rows", R::kResults, {}}};
constexpr K kData[] = {{"source", R::kResults, {}},          {"synthetic", R::kResults, kSynthetic},
                       {"train_path", R::kResults, {}},      {"pool_path", R::kResults, {}},
                       {"holdout_path", R::kResults, {}},    {"feature_columns", R::kResults, {}},
                       {"target_column", R::kResults, {}},   {"target_columns", R::kResults, {}},
                       {"x_path", R::kResults, {}},
                       {"y_path", R::kResults, {}},          {"pool_x_path", R::kResults, {}},
                       {"pool_y_path", R::kResults, {}},     {"holdout_fraction", R::kResults, {}}};
// Which device and how many threads a member trains with changes its bits; so does a worker
// count that changes pack plans only through pack_size, but the layout is kept whole here.
// Where workers run (local children or Slurm jobs) does not change a member's bits; a GPU or
// not does.
constexpr K kSlurm[] = {{"partition", R::kRestart, {}},       {"workers", R::kRestart, {}},
                        {"gpus_per_worker", R::kResults, {}}, {"cpus_per_worker", R::kRestart, {}},
                        {"mem_per_worker_mb", R::kRestart, {}}, {"time_limit", R::kRestart, {}},
                        {"sbatch_args", R::kRestart, {}},     {"listen", R::kRestart, {}},
                        {"port", R::kRestart, {}},            {"advertise_host", R::kRestart, {}}};
constexpr K kResources[] = {{"gpus", R::kResults, {}},
                            {"workers_per_gpu", R::kResults, {}},
                            {"cpu_workers", R::kResults, {}},
                            {"threads_per_worker", R::kResults, {}},
                            {"cuda_graphs", R::kRestart, {}},
                            {"gpu_memory_gb", R::kRestart, {}},
                            {"executor", R::kRestart, {}},
                            {"slurm", R::kRestart, kSlurm}};
constexpr K kMutation[] = {
    {"policy", R::kResults, {}}, {"k", R::kLive, {}}, {"argv", R::kResults, {}}, {"timeout_s", R::kLive, {}},
    {"score", R::kLive, {}}, {"batch", R::kLive, {}}};
constexpr K kRounds[] = {{"count", R::kLive, {}}, {"stop_below_error", R::kLive, {}}};
constexpr K kRecycle[] = {{"after_tasks", R::kLive, {}},
                          {"rss_mb", R::kLive, {}},
                          {"rss_growth_pct", R::kLive, {}},
                          {"gpu_reserved_mb", R::kLive, {}}};
constexpr K kService[] = {{"control_socket", R::kRestart, {}},
                          {"http_port", R::kRestart, {}},
                          {"http_bind", R::kRestart, {}},
                          {"log_file", R::kRestart, {}}};
// What a long run keeps on disk changes no member's bits; a new window applies at the next commit.
constexpr K kRetention[] = {{"keep_rounds", R::kLive, {}}, {"pin", R::kLive, {}}};
// A state directory moved to another disk, or a run renamed, is the same run.
constexpr K kTop[] = {{"run_name", R::kRestart, {}},
                      {"state_dir", R::kRestart, {}},
                      {"run_seed", R::kResults, {}},
                      {"task", R::kResults, {}},
                      {"resources", R::kResults, kResources},
                      {"data", R::kResults, kData},
                      {"members", R::kResults, kMembers},
                      {"mutation", R::kResults, kMutation},
                      {"rounds", R::kLive, kRounds},
                      {"heartbeat_timeout_s", R::kLive, {}},
                      {"max_task_attempts", R::kLive, {}},
                      {"recycle", R::kLive, kRecycle},
                      {"min_members", R::kLive, {}},
                      {"stop_timeout_s", R::kLive, {}},
                      {"save_checkpoints", R::kResults, {}},
                      {"results_layout", R::kLive, {}},
                      {"retention", R::kLive, kRetention},
                      {"service", R::kRestart, kService},
                      {"pack_size", R::kResults, {}}};

bool IsIndex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// RFC 6901 segments of a pointer, unescaped.
template <class F>
bool ForEachSegment(std::string_view pointer, F f) {
  size_t pos = 0;
  while (pos < pointer.size()) {
    if (pointer[pos] != '/') return false;
    size_t end = pointer.find('/', pos + 1);
    if (end == std::string_view::npos) end = pointer.size();
    std::string seg;
    for (size_t i = pos + 1; i < end; ++i) {
      if (pointer[i] == '~' && i + 1 < end) {
        seg += pointer[i + 1] == '1' ? '/' : '~';
        ++i;
      } else {
        seg += pointer[i];
      }
    }
    if (!f(seg)) return false;
    pos = end;
  }
  return true;
}

const K* Find(std::span<const K> table, std::string_view name) {
  for (const K& k : table)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace

std::string PointerChild(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::span<const ConfigKey> ConfigTopKeys() { return kTop; }

std::span<const ConfigKey> ConfigKeysOf(std::string_view table) {
  std::span<const K> cur = kTop;
  bool ok = ForEachSegment(table, [&](const std::string& seg) {
    if (IsIndex(seg)) return true;  // an element of a list keeps its list's keys
    const K* k = Find(cur, seg);
    if (k == nullptr) return false;
    cur = k->children;
    return true;
  });
  return ok ? cur : std::span<const K>{};
}

std::optional<ChangeRule> RuleFor(const std::string& pointer) {
  std::span<const K> cur = kTop;
  std::optional<ChangeRule> rule;
  bool leaf = false;
  bool ok = ForEachSegment(pointer, [&](const std::string& seg) {
    if (leaf || (rule && IsIndex(seg))) return true;  // inside a leaf's value, or a list element
    const K* k = Find(cur, seg);
    if (k == nullptr) return false;
    rule = k->rule;
    cur = k->children;
    leaf = cur.empty();
    return true;
  });
  return ok ? rule : std::nullopt;
}

}  // namespace ens
