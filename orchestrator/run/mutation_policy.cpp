#include "orchestrator/run/mutation_policy.h"


#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "common/base/seed.h"
#include "common/base/subprocess.h"
#include "common/scoring/committee_score.h"
#include "orchestrator/run/diverse_batch.h"

namespace ens {
namespace {

std::vector<uint64_t> UnusedPoolRows(const MutationContext& c) {
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < c.pool->rows(); ++i)
    if (!(*c.pool_used)[i]) ids.push_back(i);
  return ids;
}

Mutation AppendFromPool(const MutationSpec& spec, const MutationContext& c) {
  std::vector<uint64_t> ids = UnusedPoolRows(c);
  SeededRng rng(SplitMix64(c.run_seed ^ SplitMix64(0xA99E4D + static_cast<uint64_t>(c.round))));
  size_t k = std::min<size_t>(static_cast<size_t>(spec.k), ids.size());
  for (size_t i = 0; i < k; ++i) std::swap(ids[i], ids[i + rng.Below(ids.size() - i)]);
  Mutation m;
  m.add.features = c.features;
  m.add.targets = c.head.targets();
  m.pool_ids.assign(ids.begin(), ids.begin() + k);
  return m;
}

Mutation QueryByCommittee(const MutationSpec& spec, const MutationContext& c) {
  std::vector<const std::vector<float>*> preds;
  for (const auto& r : *c.members) preds.push_back(&r.pool_pred);
  const int width = c.head.OutputWidth();
  const CommitteeScore score = c.head.Effective(spec.score);
  // No members to ask: every row scores 0, so the lowest unused ids are taken.
  std::vector<double> spread = preds.empty() ? std::vector<double>(c.pool->rows(), 0.0)
                                             : CommitteeScores(score, preds, width);
  std::vector<uint64_t> ids = UnusedPoolRows(c);
  size_t k = std::min<size_t>(static_cast<size_t>(spec.k), ids.size());
  Mutation m;
  m.add.features = c.features;
  m.add.targets = c.head.targets();
  if (spec.batch == BatchMode::kDiverse) {
    m.pool_ids = SelectDiverseBatch(*c.pool, std::move(ids), spread, k);
    return m;
  }
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](uint64_t a, uint64_t b) {
    return spread[a] != spread[b] ? spread[a] > spread[b] : a < b;
  });
  m.pool_ids.assign(ids.begin(), ids.begin() + k);
  return m;
}

// Runs argv with `input` on stdin; returns stdout. Enforces exit 0 and the timeout; the
// command runs in its own process group, killed whole on timeout or when on_wait says stop.
StatusOr<std::string> RunCommand(const std::vector<std::string>& argv, const std::string& input,
                                 double timeout_s, const std::function<bool()>& on_wait,
                                 const std::vector<std::pair<std::string, std::string>>& env) {
  const std::string name = argv[0];
  SubprocessSpec spec;
  spec.argv = argv;
  spec.set_env = env;
  auto r = RunToEnd(spec, input, timeout_s, on_wait);
  if (!r.ok()) {
    const Status& s = r.status();
    switch (s.code()) {
      case Status::Code::kTimeout:
        return Status::Timeout("mutation command " + name + " did not finish within " + std::to_string(timeout_s) + " s");
      case Status::Code::kCancelled:
        return Status::Cancelled("mutation command " + name + " abandoned: the daemon is stopping");
      case Status::Code::kNotFound:
        return Status::InvalidArgument("mutation command " + name + " cannot be run: " + s.message());
      case Status::Code::kInvalidArgument:
        return Status::InvalidArgument("mutation command " + name + ": output too large (" + s.message() + ")");
      default:
        return Status::IOError("mutation command " + name + ": " + s.message());
    }
  }
  if (r->exit.signaled)
    return Status::InvalidArgument("mutation command " + name + " was killed by signal " + std::to_string(r->exit.signal));
  if (r->exit.code != 0)
    return Status::InvalidArgument("mutation command " + name + " exited with " + std::to_string(r->exit.code));
  return std::move(r->out);
}

}  // namespace

StatusOr<Mutation> ParseCommandOutput(const std::string& text, int features, uint64_t train_rows,
                                      const std::string& origin, const ClassList* classes, int targets,
                                      const std::vector<bool>* pool_used) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(origin + ": output is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "add" && it.key() != "drop" && it.key() != "take")
      return Status::InvalidArgument(origin + ": /" + it.key() + ": unknown key");
  Mutation m;
  m.add.features = features;
  m.add.targets = classes ? 1 : targets;
  const size_t width = static_cast<size_t>(features + m.add.targets);
  if (j.contains("add")) {
    if (!j["add"].is_array()) return Status::InvalidArgument(origin + ": /add: must be an array of rows");
    std::vector<float> row(width);
    for (size_t r = 0; r < j["add"].size(); ++r) {
      const auto& a = j["add"][r];
      std::string where = origin + ": /add/" + std::to_string(r);
      if (!a.is_array() || a.size() != width)
        return Status::InvalidArgument(where + ": must be an array of " + std::to_string(width) +
                                       (classes ? " values (feature numbers then a class label)"
                                        : m.add.targets > 1 ? " numbers (features then " + std::to_string(m.add.targets) + " targets)"
                                                            : " numbers (features then target)"));
      float target = 0;
      if (classes) {
        const auto& y = a[features];
        const std::string at = where + "/" + std::to_string(features) + ": ";
        if (!y.is_string() && !y.is_number_integer())
          return Status::InvalidArgument(at + "a class label must be a string or an integer");
        const std::string label = y.is_string() ? CanonicalLabel(y.get<std::string>()) : y.dump();
        if (Status s = classes->Lookup(label, at, &target); !s.ok()) return s;
      }
      for (size_t c = 0; c < (classes ? a.size() - 1 : a.size()); ++c) {
        double v = a[c].is_number() ? a[c].get<double>() : NAN;
        if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max())
          return Status::InvalidArgument(where + "/" + std::to_string(c) + ": not a finite float32 number");
      }
      for (size_t c = 0; c < (classes ? a.size() - 1 : a.size()); ++c) row[c] = a[c].get<float>();
      if (classes) row[static_cast<size_t>(features)] = target;
      m.add.AppendRow(row.data(), row.data() + features);
    }
  }
  if (j.contains("drop")) {
    if (!j["drop"].is_array()) return Status::InvalidArgument(origin + ": /drop: must be an array of row ids");
    for (size_t i = 0; i < j["drop"].size(); ++i) {
      const auto& d = j["drop"][i];
      if (!d.is_number_unsigned() || d.get<uint64_t>() >= train_rows)
        return Status::InvalidArgument(origin + ": /drop/" + std::to_string(i) + ": not a row id below " +
                                       std::to_string(train_rows));
      m.drop.push_back(d.get<uint64_t>());
    }
    std::sort(m.drop.begin(), m.drop.end());
    m.drop.erase(std::unique(m.drop.begin(), m.drop.end()), m.drop.end());
  }
  if (j.contains("take")) {
    if (!j["take"].is_array()) return Status::InvalidArgument(origin + ": /take: must be an array of pool row ids");
    const uint64_t pool_rows = pool_used ? pool_used->size() : 0;
    std::map<uint64_t, size_t> taken;  // id -> its index in /take
    for (size_t i = 0; i < j["take"].size(); ++i) {
      const auto& t = j["take"][i];
      const std::string where = origin + ": /take/" + std::to_string(i) + ": ";
      if (!t.is_number_unsigned() || t.get<uint64_t>() >= pool_rows)
        return Status::InvalidArgument(where + t.dump() + " is not a pool row id below " + std::to_string(pool_rows));
      const uint64_t id = t.get<uint64_t>();
      if ((*pool_used)[id])
        return Status::InvalidArgument(where + "pool row " + std::to_string(id) +
                                       " is in training already (taken in an earlier round)");
      if (auto [at, fresh] = taken.emplace(id, i); !fresh)
        return Status::InvalidArgument(where + "pool row " + std::to_string(id) + " is taken twice (also /take/" +
                                       std::to_string(at->second) + ")");
      m.pool_ids.push_back(id);
    }
  }
  return m;
}

StatusOr<Mutation> DecideMutation(const MutationSpec& spec, const MutationContext& c) {
  switch (spec.policy) {
    case MutationPolicyKind::kAppendFromPool: return AppendFromPool(spec, c);
    case MutationPolicyKind::kQueryByCommittee: return QueryByCommittee(spec, c);
    case MutationPolicyKind::kCommand: {
      auto out = RunCommand(spec.argv, c.round_summary.dump() + "\n", spec.timeout_s, c.on_wait, c.command_env);
      if (!out.ok()) return out.status();
      return ParseCommandOutput(*out, c.features, c.train_rows, "mutation command " + spec.argv[0], c.classes,
                                c.head.targets(), c.pool_used);
    }
    case MutationPolicyKind::kNone: break;
  }
  Mutation none;
  none.add.features = c.features;
  none.add.targets = c.head.targets();
  return none;
}

}  // namespace ens
