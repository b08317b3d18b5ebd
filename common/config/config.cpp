// Config parsing and validation.
//
// The text is parsed once into nlohmann::json; then every section is read by a Validator
// that records each problem and carries on, so a user fixes every mistake in one edit
// instead of one per run. Field readers leave the default in place when a key is absent.
#include "common/config/config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include "common/config/config_keys.h"
#include "common/config/config_validator.h"
#include "common/config/run_head.h"
#include "common/base/table.h"

namespace ens {
namespace {

using namespace config_detail;  // Validator and its helpers (common/config/config_validator.h)
using namespace std::string_view_literals;

// The keys of each object (common/config/config_keys.h: the same table classifies changes).
const Keys kTopKeys = ConfigTopKeys();
const Keys kServiceKeys = ConfigKeysOf("/service");
const Keys kRecycleKeys = ConfigKeysOf("/recycle");
const Keys kResourceKeys = ConfigKeysOf("/resources");
const Keys kSlurmKeys = ConfigKeysOf("/resources/slurm");
const Keys kDataKeys = ConfigKeysOf("/data");
const Keys kSyntheticKeys = ConfigKeysOf("/data/synthetic");
const Keys kMembersKeys = ConfigKeysOf("/members");
const Keys kMemberKeys = ConfigKeysOf("/members/defaults");
const Keys kLayerKeys = ConfigKeysOf("/members/defaults/layers");
const Keys kEarlyStopKeys = ConfigKeysOf("/members/defaults/early_stopping");
const Keys kModelKeys = ConfigKeysOf("/members/defaults/model");
const Keys kMutationKeys = ConfigKeysOf("/mutation");
const Keys kRoundsKeys = ConfigKeysOf("/rounds");
const Keys kRetentionKeys = ConfigKeysOf("/retention");

// A member count is a list size; a typo like 1e6 must not allocate a million specs.
constexpr int kMaxMembers = 10000;
// Only documented when not given explicitly, so "weight_decay": 0 with adamw stays 0.
constexpr double kAdamwDefaultWeightDecay = 0.01;

// ---- members -----------------------------------------------------------------------------

void ReadLayers(Validator& v, const json& obj, const std::string& ptr, MemberSpec* m) {
  const json* j = Find(obj, "layers");
  if (j == nullptr) return;
  const std::string p = Child(ptr, "layers");
  if (!j->is_array() || j->empty()) {
    v.Expect(p, "must be a non-empty array of layer objects", *j);
    return;
  }
  std::vector<LayerSpec> layers(j->size());
  for (size_t i = 0; i < j->size(); ++i) {
    const json& l = (*j)[i];
    const std::string lp = Child(p, i);
    if (!v.Object(l, lp, kLayerKeys)) continue;
    if (!l.contains("units")) v.Error(Child(lp, "units"), "is required");
    v.Int(l, lp, "units", 1, INT_MAX, &layers[i].units);
    v.Enum(l, lp, "activation", &layers[i].activation);
    v.Number(l, lp, "dropout", kFraction, &layers[i].dropout);
  }
  m->layers = std::move(layers);  // a layer list replaces, never merges
}

void ReadEarlyStopping(Validator& v, const json& obj, const std::string& ptr,
                       EarlyStoppingSpec* es) {
  const std::string p = Child(ptr, "early_stopping");
  const json* j = v.Section(obj, ptr, "early_stopping", kEarlyStopKeys);
  if (j == nullptr) return;
  v.Bool(*j, p, "enabled", &es->enabled);
  v.Enum(*j, p, "monitor", &es->monitor);
  v.Int(*j, p, "patience", 0, INT_MAX, &es->patience);
  v.Number(*j, p, "min_delta", kNonNegative, &es->min_delta);
  v.Bool(*j, p, "restore_best", &es->restore_best);
  v.Bool(*j, p, "refit", &es->refit);
}

void ReadModel(Validator& v, const json& obj, const std::string& ptr, ModelSpec* m) {
  const std::string p = Child(ptr, "model");
  const json* j = v.Section(obj, ptr, "model", kModelKeys);
  if (j == nullptr) return;
  v.Enum(*j, p, "kind", &m->kind);
  v.Strings(*j, p, "argv", /*allow_empty=*/true, &m->argv);
  v.Number(*j, p, "timeout_s", kPositive, &m->timeout_s);
  v.Strings(*j, p, "predict_argv", /*allow_empty=*/true, &m->predict_argv);
  if (v.String(*j, p, "path", &m->path)) m->path_at = Child(p, "path");
  v.Enum(*j, p, "init", &m->init);
}

// A member spec while it is being overlaid; remembers what the adamw default depends on.
struct PartialMember {
  MemberSpec spec;
  bool weight_decay_given = false;
  bool loss_given = false;
  std::string origin;     // pointer of the object that produced it, for later errors
  std::string layers_at;  // pointer of the "layers" it inherited; empty when none was given
};

// Overlays the member keys present in j onto *m; absent keys keep their current value.
void OverlayMember(Validator& v, const json& j, const std::string& ptr, PartialMember* pm) {
  if (!v.Object(j, ptr, kMemberKeys)) return;
  MemberSpec* m = &pm->spec;
  v.Name(j, ptr, "name", &m->name);
  if (j.contains("layers")) pm->layers_at = Child(ptr, "layers");
  ReadLayers(v, j, ptr, m);
  v.Enum(j, ptr, "initializer", &m->initializer);
  v.Number(j, ptr, "l1", kNonNegative, &m->l1);
  v.Number(j, ptr, "l2", kNonNegative, &m->l2);
  if (j.contains("loss")) pm->loss_given = true;
  v.Enum(j, ptr, "loss", &m->loss);
  v.Number(j, ptr, "huber_delta", kPositive, &m->huber_delta);
  v.Number(j, ptr, "label_smoothing", kFraction, &m->label_smoothing);
  v.Enum(j, ptr, "optimizer", &m->optimizer);
  v.Number(j, ptr, "lr", kPositive, &m->lr);
  if (j.contains("weight_decay")) pm->weight_decay_given = true;
  v.Number(j, ptr, "weight_decay", kNonNegative, &m->weight_decay);
  v.Number(j, ptr, "momentum", kFraction, &m->momentum);
  v.Int(j, ptr, "epochs", 1, INT_MAX, &m->epochs);
  v.Int(j, ptr, "batch_size", 1, INT_MAX, &m->batch_size);
  ReadEarlyStopping(v, j, ptr, &m->early_stopping);
  v.Enum(j, ptr, "split", &m->split);
  v.Number(j, ptr, "validation_split", kFraction, &m->validation_split);
  v.Number(j, ptr, "adversarial_eps", kNonNegative, &m->adversarial_eps);
  v.Unsigned(j, ptr, "seed_offset", &m->seed_offset);
  ReadModel(v, j, ptr, &m->model);
  v.Bool(j, ptr, "warm_start", &m->warm_start);
  v.Int(j, ptr, "warm_start_epochs", 1, INT_MAX, &m->warm_start_epochs);
}

// The loss and its options against the run's task (the classification default included).
void CheckTaskLoss(Validator& v, TaskKind task, PartialMember* pm) {
  MemberSpec& m = pm->spec;
  const std::string loss_at = Child(pm->origin, "loss");
  if (task == TaskKind::kClassification) {
    if (!pm->loss_given) m.loss = LossKind::kCrossEntropy;
    else if (m.loss != LossKind::kCrossEntropy && !v.HasErrorAt(loss_at))
      v.Error(loss_at, "\"" + std::string(Name(m.loss)) + "\" is a regression loss; task \"classification\" trains with \"cross_entropy\"");
    if (m.early_stopping.monitor != Monitor::kValLoss)
      v.Error(Child(Child(pm->origin, "early_stopping"), "monitor"),
              "\"" + std::string(Name(m.early_stopping.monitor)) + "\" is a regression metric; a classifier monitors \"val_loss\"");
    if (TraitsOf(m.model.kind).program)
      v.Error(Child(Child(pm->origin, "model"), "kind"),
              std::string(Name(m.model.kind)) + " members are regression only (task \"classification\")");
    return;
  }
  if (m.loss == LossKind::kCrossEntropy)
    v.Error(loss_at, "\"cross_entropy\" needs task \"classification\" (the top-level \"task\" key)");
  if (m.label_smoothing != 0.0)
    v.Error(Child(pm->origin, "label_smoothing"), "applies to task \"classification\" only");
}

// The "model" keys of one kind: each is required by its kind and refused by the others.
void CheckModelKeys(Validator& v, const ModelSpec& model, const std::string& model_at) {
  const bool command = model.kind == ModelKind::kCommand, script = model.kind == ModelKind::kTorchscript;
  if (command) {
    if (model.argv.empty() && !v.HasErrorAt(Child(model_at, "argv")))
      v.Error(Child(model_at, "argv"), "must be a non-empty array (program, then arguments) when kind is \"command\"");
    else if (!model.argv.empty() && model.argv[0].empty())
      v.Error(Child(Child(model_at, "argv"), 0), "the program must be a non-empty string");
    if (!model.predict_argv.empty() && model.predict_argv[0].empty())
      v.Error(Child(Child(model_at, "predict_argv"), 0), "the program must be a non-empty string");
  } else if (!model.argv.empty() || !model.predict_argv.empty()) {
    v.Error(model_at, "argv and predict_argv are for kind \"command\" only");
  }
  if (script && model.path.empty() && !v.HasErrorAt(Child(model_at, "path")))
    v.Error(Child(model_at, "path"), "is required when kind is \"torchscript\" (a file saved by torch.jit.save)");
  if (!script && !command && !model.path.empty())
    v.Error(Child(model_at, "path"), "is for kind \"torchscript\" only");
}

// Checks that need the fully overlaid spec, and the defaults that depend on other keys.
// `task` is the run's (nullopt for a lone member spec, as a worker reads it).
MemberSpec FinishMember(Validator& v, PartialMember pm, std::optional<TaskKind> task) {
  if (task) CheckTaskLoss(v, *task, &pm);
  if (pm.spec.validation_split == 0.0 && pm.spec.early_stopping.enabled)
    v.Error(Child(pm.origin, "validation_split"),
            "0 leaves no validation rows, and early_stopping watches them: set early_stopping.enabled to false "
            "or a validation_split above 0");
  const ModelSpec& model = pm.spec.model;
  const ModelKindTraits& kind = TraitsOf(model.kind);
  const std::string kind_name(Name(model.kind));
  const std::string model_at = Child(pm.origin, "model");
  const std::string refit_at = Child(Child(pm.origin, "early_stopping"), "refit");
  if (pm.spec.early_stopping.refit && !pm.spec.early_stopping.enabled)
    v.Error(refit_at, "refit trains again for the epoch count early stopping chose: set early_stopping.enabled to true");
  else if (pm.spec.early_stopping.refit && pm.spec.warm_start)
    v.Error(refit_at, "refit starts from the member's first weights twice, and warm_start from the round before's: "
                      "choose one");
  else if (pm.spec.early_stopping.refit && kind.program)
    v.Error(refit_at, "applies to members we train (a " + kind_name + " member trains itself)");
  if (pm.spec.warm_start_epochs == 0) pm.spec.warm_start_epochs = pm.spec.epochs;
  if (pm.spec.warm_start && kind.program)
    v.Error(Child(pm.origin, "warm_start"), "applies to members we train (a " + kind_name + " member trains itself)");
  CheckModelKeys(v, model, model_at);
  if (kind.program) return std::move(pm.spec);  // no layers of ours
  if (!kind.layers) {
    // Layers inherited from the defaults are the MLP members'; written here, they are a mistake.
    if (!pm.layers_at.empty() && pm.layers_at == Child(pm.origin, "layers"))
      v.Error(pm.layers_at, "does not apply to a \"" + kind_name + "\" member (its model defines its layers)");
    pm.spec.layers.clear();
  } else if (pm.spec.layers.empty() && (pm.layers_at.empty() || !v.HasErrorAt(pm.layers_at))) {
    // An invalid "layers" value was already reported where it was written; once is enough.
    v.Error(Child(pm.origin, "layers"),
            "every member needs at least one layer (set \"layers\" here or in the defaults)");
  }
  if (pm.spec.optimizer == OptimizerKind::kAdamW && !pm.weight_decay_given) {
    pm.spec.weight_decay = kAdamwDefaultWeightDecay;
  }
  return std::move(pm.spec);
}

// Expands one member array ("list" or "variants") on top of the defaults.
std::vector<PartialMember> OverlayEach(Validator& v, const json& members, const std::string& ptr,
                                       std::string_view key, const PartialMember& defaults) {
  std::vector<PartialMember> out;
  const json* j = Find(members, key);
  if (j == nullptr) return out;
  const std::string p = Child(ptr, key);
  if (!j->is_array()) {
    v.Expect(p, "must be an array of member objects", *j);
    return out;
  }
  for (size_t i = 0; i < j->size(); ++i) {
    PartialMember pm = defaults;
    pm.origin = Child(p, i);
    OverlayMember(v, (*j)[i], pm.origin, &pm);
    out.push_back(std::move(pm));
  }
  return out;
}

void ReadMembers(Validator& v, const json& root, const std::string& base_dir, TaskKind task,
                 std::vector<MemberSpec>* out) {
  const std::string p = "/members";
  const json* j = Find(root, "members");
  if (j == nullptr) {
    v.Error(p, "is required: give \"list\" and/or \"count\" members");
    return;
  }
  if (!v.Object(*j, p, kMembersKeys)) return;
  PartialMember defaults;
  defaults.origin = Child(p, "defaults");
  if (const json* d = Find(*j, "defaults")) OverlayMember(v, *d, defaults.origin, &defaults);

  std::vector<PartialMember> resolved = OverlayEach(v, *j, p, "list", defaults);
  std::vector<PartialMember> variants = OverlayEach(v, *j, p, "variants", defaults);
  int count = static_cast<int>(std::min<size_t>(variants.size(), kMaxMembers));
  v.Int(*j, p, "count", 0, kMaxMembers, &count);
  for (int i = 0; i < count; ++i) {
    resolved.push_back(variants.empty() ? defaults : variants[i % variants.size()]);
  }
  if (resolved.empty()) {
    v.Error(p, "needs at least one member: give \"list\" entries or \"count\" >= 1");
    return;
  }
  std::vector<std::string> names;
  std::optional<size_t> gaussian, other;  // a member with a Gaussian head, one without
  for (size_t i = 0; i < resolved.size(); ++i) {
    MemberSpec m = FinishMember(v, resolved[i], task);
    const bool head = m.loss == LossKind::kGaussianNll && !TraitsOf(m.model.kind).program;
    if (head && !gaussian) gaussian = i;
    if (!head && !other) other = i;
    if (m.name.empty()) {  // "m000", ...: the member's overall index, list first
      char name[24];
      std::snprintf(name, sizeof name, "m%03zu", i);
      m.name = name;
    }
    auto first = std::find(names.begin(), names.end(), m.name);
    if (first != names.end()) {
      v.Error(Child(resolved[i].origin, "name"), "duplicate member name '" + m.name +
                                                     "' (first used by member " +
                                                     std::to_string(first - names.begin()) + ")");
    }
    names.push_back(m.name);
    // A bare program name is looked up in PATH when it runs; a path-like one is a file here.
    for (auto* argv : {&m.model.argv, &m.model.predict_argv})
      if (!argv->empty() && (*argv)[0].find('/') != std::string::npos) (*argv)[0] = ResolvePath(base_dir, (*argv)[0]);
    if (!m.model.path.empty()) m.model.path = ResolvePath(base_dir, m.model.path);
    out->push_back(std::move(m));
  }
  // The ensemble of Gaussian heads is a mixture of all of them: all members have one, or none.
  if (gaussian && other) {
    const PartialMember& at = resolved[std::max(*gaussian, *other)];
    v.Error(Child(at.origin, !TraitsOf(at.spec.model.kind).program ? "loss" : "model"),
            "\"gaussian_nll\" must be the loss of every member of a run or of none (member " +
                std::to_string(*gaussian) + " has it, member " + std::to_string(*other) + " has not)");
  }
}

// ---- other sections ----------------------------------------------------------------------

void ReadRetention(Validator& v, const json& root, RetentionSpec* r) {
  const std::string p = "/retention";
  const json* j = v.Section(root, "", "retention", kRetentionKeys);
  if (j == nullptr) return;
  v.Int(*j, p, "keep_rounds", 0, INT_MAX, &r->keep_rounds);
  const json* pin = Find(*j, "pin");
  if (pin == nullptr) return;
  if (!pin->is_array()) {
    v.Error(p + "/pin", "must be a list of round numbers, got " + pin->dump());
    return;
  }
  for (size_t i = 0; i < pin->size(); ++i) {
    const json& e = (*pin)[i];
    const std::string at = p + "/pin/" + std::to_string(i);
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT_MAX)
      v.Error(at, "must be a round number (an integer >= 0), got " + e.dump());
    else if (std::find(r->pin.begin(), r->pin.end(), e.get<int>()) != r->pin.end())
      v.Error(at, "round " + std::to_string(e.get<int>()) + " is pinned twice");
    else
      r->pin.push_back(e.get<int>());
  }
  std::sort(r->pin.begin(), r->pin.end());
}

}  // namespace

namespace config_detail {

void ReadGpus(Validator& v, const json& obj, const std::string& ptr, GpuSelection* out) {
  const json* j = Find(obj, "gpus");
  if (j == nullptr) return;
  const std::string p = Child(ptr, "gpus");
  if (j->is_string() && (*j == "auto" || *j == "none")) {
    *out = *j == "auto" ? GpuSelection::Auto() : GpuSelection::None();
    return;
  }
  if (j->is_number_integer() && j->get<int64_t>() >= 1 && j->get<int64_t>() <= 4096) {
    *out = GpuSelection::Count(j->get<int>());
    return;
  }
  if (!j->is_array() || j->empty()) {
    v.Expect(p, "must be \"auto\", \"none\", a GPU count in [1, 4096] or a non-empty array of GPU indices or UUIDs", *j);
    return;
  }
  std::vector<std::string> list;
  for (size_t i = 0; i < j->size(); ++i) {
    const json& g = (*j)[i];
    std::string id = g.is_number_unsigned() ? std::to_string(g.get<uint64_t>())
                     : g.is_string()        ? g.get<std::string>()
                                            : "";
    if (id.empty()) {
      v.Expect(Child(p, i), "must be a GPU index (integer >= 0) or a UUID string", g);
    } else if (std::find(list.begin(), list.end(), id) != list.end()) {
      v.Error(Child(p, i), "duplicate GPU '" + id + "'");
    } else {
      list.push_back(id);
    }
  }
  *out = GpuSelection::List(std::move(list));
}

}  // namespace config_detail

namespace {

void ReadResources(Validator& v, const json& root, ResourcesSpec* r) {
  const std::string p = "/resources";
  const json* j = v.Section(root, "", "resources", kResourceKeys);
  if (j == nullptr) return;
  ReadGpus(v, *j, p, &r->gpus);
  v.Int(*j, p, "workers_per_gpu", 1, INT_MAX, &r->workers_per_gpu);
  v.Int(*j, p, "cpu_workers", 1, INT_MAX, &r->cpu_workers);
  v.Int(*j, p, "threads_per_worker", 1, INT_MAX, &r->threads_per_worker);
  v.Bool(*j, p, "cuda_graphs", &r->cuda_graphs);
  v.Number(*j, p, "gpu_memory_gb", kNonNegative, &r->gpu_memory_gb);
  if (r->gpu_memory_gb > 0 && r->gpus.none())
    v.Error(Child(p, "gpu_memory_gb"), "is a share of each GPU the run uses; this run uses none (gpus \"none\")");
  v.Enum(*j, p, "executor", &r->executor);
  const std::string sp = Child(p, "slurm");
  if (const json* sj = v.Section(*j, p, "slurm", kSlurmKeys)) {
    SlurmSpec& s = r->slurm;
    v.String(*sj, sp, "partition", &s.partition);
    v.Int(*sj, sp, "workers", 1, INT_MAX, &s.workers);
    v.Int(*sj, sp, "gpus_per_worker", 0, 64, &s.gpus_per_worker);
    v.Int(*sj, sp, "cpus_per_worker", 1, INT_MAX, &s.cpus_per_worker);
    v.Int(*sj, sp, "mem_per_worker_mb", 1, INT_MAX, &s.mem_per_worker_mb);
    v.String(*sj, sp, "time_limit", &s.time_limit);
    v.Strings(*sj, sp, "sbatch_args", /*allow_empty=*/false, &s.sbatch_args);
    v.String(*sj, sp, "listen", &s.listen);
    v.Int(*sj, sp, "port", 0, 65535, &s.port);
    v.String(*sj, sp, "advertise_host", &s.advertise_host);
  } else if (r->executor == ExecutorKind::kSlurm && Find(*j, "slurm") == nullptr) {
    v.Error(sp, "is required when executor is \"slurm\" (at least {\"workers\": N})");
  }
}

void ReadSynthetic(Validator& v, const json& data, const std::string& ptr, DataSpec* d) {
  const std::string p = Child(ptr, "synthetic");
  const json* j = v.Section(data, ptr, "synthetic", kSyntheticKeys);
  if (j == nullptr) return;
  v.Int(*j, p, "features", 5, INT_MAX, &d->synthetic_features);  // Friedman #1 uses 5
  v.Number(*j, p, "noise", kNonNegative, &d->synthetic_noise);
  v.Int(*j, p, "initial_rows", 1, INT_MAX, &d->initial_rows);
  v.Int(*j, p, "pool_rows", 0, INT_MAX, &d->pool_rows);
  v.Int(*j, p, "holdout_rows", 1, INT_MAX, &d->holdout_rows);
}

// The files a column-file source (csv) needs: train_path and the targets, by column name.
void CheckColumnFiles(Validator& v, bool listed, const std::string& p, const std::string& why, const DataSpec& d) {
  if (d.train_path.empty()) v.Error(Child(p, "train_path"), "is required" + why);
  if (d.target_columns.empty() && !listed) v.Error(Child(p, "target_column"), "is required" + why + " (or target_columns)");
  for (size_t i = 0; i < d.feature_columns.size(); ++i) {
    if (std::find(d.target_columns.begin(), d.target_columns.end(), d.feature_columns[i]) != d.target_columns.end()) {
      v.Error(Child(Child(p, "feature_columns"), i), "must not be a target column");
    }
  }
}

// The files an x/y-pair source (npy) needs. train_path / pool_path may name a pair as
// "<path>.x.npy" + "<path>.y.npy"; that is resolved here, once, into x/y paths.
void CheckXyPairs(Validator& v, bool listed, const std::string& p, const std::string& why, DataSpec* d) {
  if (listed) v.Error(Child(p, "target_columns"), "is for csv sources; an npy y of shape (rows, T) has T targets");
  if (d->x_path.empty() && d->y_path.empty() && !d->train_path.empty()) {
    d->x_path = d->train_path + ".x.npy";
    d->y_path = d->train_path + ".y.npy";
  }
  if (d->pool_x_path.empty() && d->pool_y_path.empty() && !d->pool_path.empty()) {
    d->pool_x_path = d->pool_path + ".x.npy";
    d->pool_y_path = d->pool_path + ".y.npy";
  }
  if (d->x_path.empty()) v.Error(Child(p, "x_path"), "is required" + why);
  if (d->y_path.empty()) v.Error(Child(p, "y_path"), "is required" + why);
  if (d->pool_x_path.empty() != d->pool_y_path.empty()) {
    v.Error(Child(p, d->pool_x_path.empty() ? "pool_x_path" : "pool_y_path"),
            "pool_x_path and pool_y_path must be given together");
  }
}

// Requirements that depend on "source": the keys of its DataKeys (run_options.h).
void CheckDataSource(Validator& v, const json& data, const std::string& p, DataSpec* d) {
  const std::string why = " when source is \"" + std::string(Name(d->source)) + "\"";
  const bool listed = Find(data, "target_columns") != nullptr;  // an empty list is its own error
  switch (TraitsOf(d->source).keys) {
    case DataKeys::kGenerated: return;
    case DataKeys::kColumnFiles: return CheckColumnFiles(v, listed, p, why, *d);
    case DataKeys::kXyPairs: return CheckXyPairs(v, listed, p, why, d);
  }
}

// target_columns (distinct names, at most kMaxTargets), or target_column ("" = not given):
// not both, into d->target_columns.
void ReadTargetColumns(Validator& v, const json& data, const std::string& p, DataSpec* d) {
  std::string target_column;
  v.String(data, p, "target_column", &target_column);
  const std::string at = Child(p, "target_columns");
  if (v.Strings(data, p, "target_columns", /*allow_empty=*/false, &d->target_columns)) {
    if (d->target_columns.empty()) v.Error(at, "must name at least one column");
    if (d->target_columns.size() > static_cast<size_t>(kMaxTargets))
      v.Error(at, "names " + std::to_string(d->target_columns.size()) + " columns; at most " +
                      std::to_string(kMaxTargets) + " targets");
    for (size_t i = 0; i < d->target_columns.size(); ++i)
      for (size_t k = 0; k < i; ++k)
        if (d->target_columns[k] == d->target_columns[i])
          v.Error(Child(at, i), "'" + d->target_columns[i] + "' is listed twice (first at " + std::to_string(k) + ")");
    if (!target_column.empty())
      v.Error(at, "give target_column (one target) or target_columns, not both");
  }
  if (d->target_columns.empty() && !target_column.empty()) d->target_columns = {target_column};
}

void ReadData(Validator& v, const json& root, const std::string& base_dir, DataSpec* d) {
  const std::string p = "/data";
  const json* j = v.Section(root, "", "data", kDataKeys);
  if (j == nullptr) return;
  v.Enum(*j, p, "source", &d->source);
  ReadSynthetic(v, *j, p, d);
  const std::pair<std::string_view, std::string DataSpec::*> kPaths[] = {
      {"train_path", &DataSpec::train_path},
      {"pool_path", &DataSpec::pool_path},
      {"holdout_path", &DataSpec::holdout_path},
      {"x_path", &DataSpec::x_path},
      {"y_path", &DataSpec::y_path},
      {"pool_x_path", &DataSpec::pool_x_path},
      {"pool_y_path", &DataSpec::pool_y_path}};
  for (const auto& [key, field] : kPaths) v.Path(*j, p, key, base_dir, &(d->*field));
  v.Strings(*j, p, "feature_columns", /*allow_empty=*/false, &d->feature_columns);
  ReadTargetColumns(v, *j, p, d);
  v.Number(*j, p, "holdout_fraction", kOpenFraction, &d->holdout_fraction);
  CheckDataSource(v, *j, p, d);
}

void ReadMutation(Validator& v, const json& root, const std::string& base_dir, MutationSpec* m) {
  const std::string p = "/mutation";
  const json* j = v.Section(root, "", "mutation", kMutationKeys);
  if (j == nullptr) return;
  v.Enum(*j, p, "policy", &m->policy);
  // A k that is already reported as invalid is not reported again for the policy.
  bool k_usable = v.Int(*j, p, "k", 0, INT_MAX, &m->k) || !j->contains("k");
  bool argv_usable =
      v.Strings(*j, p, "argv", /*allow_empty=*/true, &m->argv) || !j->contains("argv");
  v.Number(*j, p, "timeout_s", kPositive, &m->timeout_s);
  v.Enum(*j, p, "score", &m->score);
  v.Enum(*j, p, "batch", &m->batch);
  if (m->batch != BatchMode::kTop && m->policy != MutationPolicyKind::kQueryByCommittee)
    v.Error(Child(p, "batch"), "is for policy \"query_by_committee\" (policy is \"" +
                                   std::string(Name(m->policy)) + "\")");
  const std::string why = " when policy is \"" + std::string(Name(m->policy)) + "\"";
  if ((m->policy == MutationPolicyKind::kAppendFromPool || m->policy == MutationPolicyKind::kQueryByCommittee) && m->k < 1 &&
      k_usable) {
    v.Error(Child(p, "k"), "must be an integer >= 1" + why);
  }
  if (m->policy == MutationPolicyKind::kCommand && argv_usable) {
    if (m->argv.empty()) {
      v.Error(Child(p, "argv"), "must be a non-empty array (program, then arguments)" + why);
    } else if (m->argv[0].empty()) {
      v.Error(Child(Child(p, "argv"), 0), "the program must be a non-empty string");
    }
  }
  // A bare program name is looked up in PATH; only something path-like is a file here.
  if (!m->argv.empty() && m->argv[0].find('/') != std::string::npos) {
    m->argv[0] = ResolvePath(base_dir, m->argv[0]);
  }
}

// What the task asks of the data and of the mutation score; fills the score's default.
void CheckTask(Validator& v, const json& root, Config* c) {
  const bool classify = c->task == TaskKind::kClassification;
  const bool synthetic = c->data.source == DataSource::kSynthetic;
  if (classify && synthetic && Find(root, "data") != nullptr)
    v.Error("/data/source", "the synthetic data is a regression target; task \"classification\" needs \"csv\" or \"npy\"");
  else if (classify && synthetic)
    v.Error("/data", "is required for task \"classification\" (the built-in synthetic data is a regression target)");
  CommitteeScore& score = c->mutation.score;
  const RunHead head = RunHead::For(*c, 0, 1);
  const json* mutation = Find(root, "mutation");
  if (mutation == nullptr || Find(*mutation, "score") == nullptr) score = head.DefaultScore();  // not given: the head's
  if (std::string why = head.ScoreProblem(score); !why.empty()) v.Error("/mutation/score", why);
  const int targets = static_cast<int>(c->data.target_columns.size());
  if (targets > 1) {
    const std::string why = TargetCountProblem(*c, targets, "target_columns");
    if (!why.empty()) v.Error("/data/target_columns", why);
  }
}

void ReadRounds(Validator& v, const json& root, RoundsSpec* r) {
  const std::string p = "/rounds";
  const json* j = v.Section(root, "", "rounds", kRoundsKeys);
  if (j == nullptr) return;
  v.Int(*j, p, "count", 1, INT_MAX, &r->count);
  const json* stop = Find(*j, "stop_below_error");
  double threshold = 0;
  if (stop != nullptr && !stop->is_null() &&
      v.Number(*j, p, "stop_below_error", kPositive, &threshold)) {
    r->stop_below_error = threshold;
  }
}

void ReadRecycle(Validator& v, const json& root, RecycleSpec* r) {
  const std::string p = "/recycle";
  const json* j = v.Section(root, "", "recycle", kRecycleKeys);
  if (j == nullptr) return;
  constexpr Range kNonNegative{0, kInf, false, true, "must be a number >= 0"};
  v.Int(*j, p, "after_tasks", 0, INT_MAX, &r->after_tasks);
  v.Number(*j, p, "rss_mb", kNonNegative, &r->rss_mb);
  v.Number(*j, p, "rss_growth_pct", kNonNegative, &r->rss_growth_pct);
  v.Number(*j, p, "gpu_reserved_mb", kNonNegative, &r->gpu_reserved_mb);
}

}  // namespace

namespace config_detail {

void ReadService(Validator& v, const json& root, const std::string& base_dir, ServiceSpec* sv) {
  const std::string p = "/service";
  const json* j = v.Section(root, "", "service", kServiceKeys);
  if (j == nullptr) return;
  // "" is the documented default (choose the location automatically), not an error.
  auto optional_path = [&](const char* key, std::string* out) {
    const json* f = Find(*j, key);
    if (f == nullptr || (f->is_string() && f->get<std::string>().empty())) return;
    v.Path(*j, p, key, base_dir, out);
  };
  optional_path("control_socket", &sv->control_socket);
  if (sv->control_socket.size() >= 108) v.Error(p + "/control_socket", "is longer than a Unix socket path may be (107)");
  v.Int(*j, p, "http_port", 0, 65535, &sv->http_port);
  if (const json* b = Find(*j, "http_bind"); b != nullptr) {
    if (!b->is_string() || b->get<std::string>().empty()) v.Error(p + "/http_bind", "must be an address string");
    else sv->http_bind = b->get<std::string>();
  }
  optional_path("log_file", &sv->log_file);
}

}  // namespace config_detail

namespace {

void ReadTop(Validator& v, const json& root, const std::string& base_dir, Config* c) {
  if (!v.Object(root, "", kTopKeys)) return;
  v.Name(root, "", "run_name", &c->run_name);
  if (!root.contains("state_dir")) v.Error("/state_dir", "is required");
  v.Path(root, "", "state_dir", base_dir, &c->state_dir);
  v.Unsigned(root, "", "run_seed", &c->run_seed);
  v.Enum(root, "", "task", &c->task);
  ReadResources(v, root, &c->resources);
  ReadData(v, root, base_dir, &c->data);
  ReadMembers(v, root, base_dir, c->task, &c->members);
  ReadMutation(v, root, base_dir, &c->mutation);
  CheckTask(v, root, c);
  ReadRounds(v, root, &c->rounds);
  v.Number(root, "", "heartbeat_timeout_s", kPositive, &c->heartbeat_timeout_s);
  v.Int(root, "", "max_task_attempts", 1, INT_MAX, &c->max_task_attempts);
  ReadRecycle(v, root, &c->recycle);
  v.Int(root, "", "min_members", 0, INT_MAX, &c->min_members);
  if (c->min_members > static_cast<int>(c->members.size()) && !c->members.empty())
    v.Error("/min_members", "is larger than the number of members (" + std::to_string(c->members.size()) + ")");
  v.Number(root, "", "stop_timeout_s", kPositive, &c->stop_timeout_s);
  v.Bool(root, "", "save_checkpoints", &c->save_checkpoints);
  if (const json* layout = Find(root, "results_layout"); layout != nullptr) {
    if (layout->is_string() && (*layout == "packs" || *layout == "members")) c->pack_results = *layout == "packs";
    else v.Error("/results_layout", "must be \"packs\" or \"members\", got " + layout->dump());
  }
  ReadRetention(v, root, &c->retention);
  ReadService(v, root, base_dir, &c->service);
  if (const json* ps = Find(root, "pack_size"); ps != nullptr) {
    if (ps->is_string() && ps->get<std::string>() == "auto") c->pack_size = 0;
    else if (ps->is_number_integer() && ps->get<int64_t>() >= 1 && ps->get<int64_t>() <= 4096)
      c->pack_size = ps->get<int>();
    else v.Error("/pack_size", "must be \"auto\" or an integer in [1, 4096], got " + ps->dump());
  }
}

// ---- parsing -----------------------------------------------------------------------------

// nlohmann keeps the last of two equal keys without a word; a pasted duplicate block would
// silently win. This follows the parser's events to report duplicates by pointer.
class DuplicateKeyFinder {
 public:
  explicit DuplicateKeyFinder(Validator* v) : v_(v) {}
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      stack_.push_back({event == E::object_start, {}, {}, 0});
    } else if (event == E::key) {
      Frame& top = stack_.back();
      top.key = parsed.get<std::string>();
      if (!top.keys.insert(top.key).second) {
        v_->Error(Pointer(), "duplicate key '" + top.key + "'");
      }
    } else {  // a value, or the end of an object or array, completes one element
      if (event != E::value) stack_.pop_back();
      if (!stack_.empty() && !stack_.back().is_object) ++stack_.back().index;
    }
    return true;  // keep everything: this only watches
  }

 private:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };
  std::string Pointer() const {
    std::string p;
    for (const Frame& f : stack_) p = f.is_object ? Child(p, f.key) : Child(p, f.index);
    return p;
  }
  Validator* v_;
  std::vector<Frame> stack_;
};

// "syntax error at 3:5: <what nlohmann says>". The line and column (in bytes) are counted
// from the error's byte offset, giving the compact form editors and grep understand.
std::string SyntaxError(const std::string& text, const json::parse_error& e) {
  size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') ++line, line_start = i + 1;
  }
  std::string what = e.what();
  size_t column_word = what.find("column ");
  size_t detail = what.find(": ", column_word == std::string::npos ? 0 : column_word);
  if (detail != std::string::npos) what = what.substr(detail + 2);
  return "syntax error at " + std::to_string(line) + ":" + std::to_string(at - line_start + 1) +
         ": " + what;
}

}  // namespace

namespace config_detail {

std::string FormatError(const ConfigError& e) {
  return e.pointer.empty() ? e.message : e.pointer + ": " + e.message;
}

std::optional<json> ParseDocument(const std::string& text, Validator& v, std::vector<ConfigError>* fatal) {
  try {
    DuplicateKeyFinder finder(&v);
    return json::parse(text, std::ref(finder), /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    *fatal = {{"", SyntaxError(text, e)}};
  } catch (const json::exception& e) {  // e.g. out_of_range 406: a number too large for a double
    *fatal = {{"", std::string("invalid JSON: ") + e.what()}};
  }
  return std::nullopt;
}

}  // namespace config_detail

std::vector<ConfigError> ValidateConfigText(const std::string& text, const std::string& base_dir,
                                            Config* out) {
  Validator v;
  std::vector<ConfigError> fatal;
  std::optional<json> root = ParseDocument(text, v, &fatal);
  if (!root) return fatal;
  Config config;
  ReadTop(v, *root, base_dir, &config);
  if (v.ok() && out != nullptr) *out = std::move(config);
  return v.Take();
}

StatusOr<Config> ParseConfig(const std::string& text, const std::string& origin,
                             const std::string& base_dir) {
  Config config;
  std::vector<ConfigError> errors = ValidateConfigText(text, base_dir, &config);
  if (errors.empty()) return config;
  std::string msg;
  for (const ConfigError& e : errors) {
    msg += (msg.empty() ? "" : "\n") + origin + ": " + FormatError(e);
  }
  return Status::InvalidArgument(msg);
}

StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::FromErrno("cannot open config file " + path, errno);
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) return Status::FromErrno("cannot read config file " + path, err);
  // Absolute, so a daemon that changes directory still finds its files.
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  std::string base_dir = (ec ? std::filesystem::path(path) : abs).parent_path().string();
  return ParseConfig(text, path, base_dir);
}

nlohmann::json MemberToJson(const MemberSpec& m) {
  json layers = json::array();
  for (const LayerSpec& l : m.layers) {
    layers.push_back(
        {{"units", l.units}, {"activation", Name(l.activation)}, {"dropout", l.dropout}});
  }
  const EarlyStoppingSpec& es = m.early_stopping;
  json early_stopping = {{"enabled", es.enabled},
                         {"monitor", Name(es.monitor)},
                         {"patience", es.patience},
                         {"min_delta", es.min_delta},
                         {"restore_best", es.restore_best}};
  if (es.refit) early_stopping["refit"] = true;  // absent when false: the specs before it read the same
  json out = {{"layers", std::move(layers)},
              {"initializer", Name(m.initializer)},
              {"l1", m.l1},
              {"l2", m.l2},
              {"loss", Name(m.loss)},
              {"huber_delta", m.huber_delta},
              {"optimizer", Name(m.optimizer)},
              {"lr", m.lr},
              {"weight_decay", m.weight_decay},
              {"momentum", m.momentum},
              {"epochs", m.epochs},
              {"batch_size", m.batch_size},
              {"early_stopping", std::move(early_stopping)},
              {"split", Name(m.split)},
              {"validation_split", m.validation_split},
              {"seed_offset", m.seed_offset}};
  // Unnamed (not yet resolved) specs omit the name, which stays empty on the way back.
  if (!m.name.empty()) out["name"] = m.name;
  if (m.label_smoothing != 0.0) out["label_smoothing"] = m.label_smoothing;
  if (m.adversarial_eps != 0.0) out["adversarial_eps"] = m.adversarial_eps;
  if (m.warm_start) out.update({{"warm_start", true}, {"warm_start_epochs", m.warm_start_epochs}});
  // A command member may have no layers of ours; an empty list is not valid config text.
  if (m.layers.empty()) out.erase("layers");
  // The built-in model is written as before "model" existed, so the normalised config of a
  // run started by an earlier version compares equal.
  if (m.model.kind != ModelKind::kMlp) out["model"] = {{"kind", Name(m.model.kind)}};
  if (m.model.kind == ModelKind::kTorchscript) out["model"].update({{"path", m.model.path}, {"init", Name(m.model.init)}});
  if (m.model.kind == ModelKind::kCommand) {
    out["model"].update({{"argv", m.model.argv}, {"timeout_s", m.model.timeout_s}});
    if (!m.model.predict_argv.empty()) out["model"]["predict_argv"] = m.model.predict_argv;
  }
  return out;
}

namespace {
// resources.slurm as the config would give it: only what is set (every value read back valid).
json SlurmToJson(const SlurmSpec& s) {
  json j = {{"workers", s.workers}, {"gpus_per_worker", s.gpus_per_worker}, {"listen", s.listen}, {"port", s.port}};
  if (!s.partition.empty()) j["partition"] = s.partition;
  if (s.cpus_per_worker > 0) j["cpus_per_worker"] = s.cpus_per_worker;
  if (s.mem_per_worker_mb > 0) j["mem_per_worker_mb"] = s.mem_per_worker_mb;
  if (!s.time_limit.empty()) j["time_limit"] = s.time_limit;
  if (!s.sbatch_args.empty()) j["sbatch_args"] = s.sbatch_args;
  if (!s.advertise_host.empty()) j["advertise_host"] = s.advertise_host;
  return j;
}
}  // namespace

nlohmann::json ConfigToJson(const Config& c) {
  json members = json::array();
  for (const MemberSpec& m : c.members) members.push_back(MemberToJson(m));
  const DataSpec& d = c.data;
  json out = {{"run_name", c.run_name},
          {"state_dir", c.state_dir},
          {"run_seed", c.run_seed},
          {"resources", {{"gpus", c.resources.gpus.ToJson()}, {"workers_per_gpu", c.resources.workers_per_gpu},
                         {"cpu_workers", c.resources.cpu_workers}, {"threads_per_worker", c.resources.threads_per_worker},
                         {"executor", Name(c.resources.executor)}}},
          {"data", {{"source", Name(d.source)},
                    {"synthetic", {{"features", d.synthetic_features}, {"noise", d.synthetic_noise},
                                   {"initial_rows", d.initial_rows}, {"pool_rows", d.pool_rows},
                                   {"holdout_rows", d.holdout_rows}}},
                    {"train_path", d.train_path}, {"pool_path", d.pool_path}, {"holdout_path", d.holdout_path},
                    {"feature_columns", d.feature_columns},
                    {"target_column", d.target_columns.size() == 1 ? d.target_columns[0] : std::string()},
                    {"x_path", d.x_path}, {"y_path", d.y_path}, {"pool_x_path", d.pool_x_path},
                    {"pool_y_path", d.pool_y_path}, {"holdout_fraction", d.holdout_fraction}}},
          {"members", {{"list", std::move(members)}}},
          {"mutation", {{"policy", Name(c.mutation.policy)}, {"k", c.mutation.k}, {"argv", c.mutation.argv},
                        {"timeout_s", c.mutation.timeout_s}}},
          {"rounds", {{"count", c.rounds.count},
                      {"stop_below_error", c.rounds.stop_below_error ? json(*c.rounds.stop_below_error) : json()}}},
          {"recycle", {{"after_tasks", c.recycle.after_tasks}, {"rss_mb", c.recycle.rss_mb},
                       {"rss_growth_pct", c.recycle.rss_growth_pct}, {"gpu_reserved_mb", c.recycle.gpu_reserved_mb}}},
          {"service", {{"control_socket", c.service.control_socket}, {"http_port", c.service.http_port},
                       {"http_bind", c.service.http_bind}, {"log_file", c.service.log_file}}},
          {"heartbeat_timeout_s", c.heartbeat_timeout_s},
          {"max_task_attempts", c.max_task_attempts},
          {"min_members", c.min_members},
          {"stop_timeout_s", c.stop_timeout_s},
          {"pack_size", c.pack_size == 0 ? json("auto") : json(c.pack_size)},
          {"save_checkpoints", c.save_checkpoints}};
  // Only "members" is written: a config without the key (the default, "packs") compares equal.
  if (!c.pack_results) out["results_layout"] = "members";
  if (c.resources.cuda_graphs) out["resources"]["cuda_graphs"] = true;  // older normalised configs stay equal
  if (c.resources.gpu_memory_gb > 0) out["resources"]["gpu_memory_gb"] = c.resources.gpu_memory_gb;
  if (c.resources.executor == ExecutorKind::kSlurm) out["resources"]["slurm"] = SlurmToJson(c.resources.slurm);
  // Written only where they differ from what runs of earlier versions did, so their
  // normalised configs compare equal.
  if (c.task != TaskKind::kRegression) out["task"] = Name(c.task);
  // The score is left out only where reading it back gives it again: "std" on a head whose
  // default is "std" (a classification run's "std" is written: its default is "bald").
  if (c.mutation.score != CommitteeScore::kStd || RunHead::For(c, 0, 1).DefaultScore() != CommitteeScore::kStd)
    out["mutation"]["score"] = Name(c.mutation.score);
  if (c.mutation.batch != BatchMode::kTop) out["mutation"]["batch"] = Name(c.mutation.batch);
  if (!c.retention.KeepsEverything() || !c.retention.pin.empty())
    out["retention"] = {{"keep_rounds", c.retention.keep_rounds}, {"pin", c.retention.pin}};
  if (d.target_columns.size() > 1) {
    out["data"].erase("target_column");
    out["data"]["target_columns"] = d.target_columns;
  }
  return out;
}

std::string TargetCountProblem(const Config& c, int targets, const std::string& source) {
  if (targets <= 1) return "";
  const std::string n = source + " gives " + std::to_string(targets) + " targets";
  if (c.task == TaskKind::kClassification) return n + "; task \"classification\" has one label column";
  for (const MemberSpec& m : c.members) {
    if (TraitsOf(m.model.kind).program)
      return n + "; member " + m.name + " is a " + std::string(Name(m.model.kind)) + " member, which predicts one target";
    if (m.loss == LossKind::kGaussianNll)
      return n + "; member " + m.name + " has a gaussian_nll head, which predicts one target";
  }
  return "";
}

Status MemberFromJson(const nlohmann::json& j, MemberSpec* out) {
  Validator v;
  PartialMember pm;
  pm.origin = "";
  OverlayMember(v, j, "", &pm);
  MemberSpec spec = j.is_object() ? FinishMember(v, std::move(pm), std::nullopt) : MemberSpec{};
  if (!v.ok()) {
    std::string msg;
    for (const ConfigError& e : v.Take()) msg += (msg.empty() ? "" : "\n") + FormatError(e);
    return Status::InvalidArgument("member spec: " + msg);
  }
  *out = std::move(spec);
  return Status::Ok();
}

}  // namespace ens
