#include "orchestrator/run/config_change.h"

#include <cinttypes>
#include <cstdio>

#include "common/base/atomic_file.h"
#include "common/state/dataset_segment.h"

namespace ens {
namespace {

using json = nlohmann::json;

void Diff(const json& a, const json& b, const std::string& ptr, std::vector<ConfigChange>* out) {
  if (a == b) return;
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) Diff(v, b.contains(k) ? b[k] : json(), PointerChild(ptr, k), out);
    for (const auto& [k, v] : b.items())
      if (!a.contains(k)) Diff(json(), v, PointerChild(ptr, k), out);
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) Diff(a[i], b[i], ptr + "/" + std::to_string(i), out);
    return;
  }
  out->push_back({ptr, a, b, RuleFor(ptr)});
}

std::string Shown(const json& j) {
  if (j.is_array() && j.size() > 3) return "a list of " + std::to_string(j.size());
  std::string s = j.is_null() ? "(absent)" : j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

}  // namespace

std::vector<ConfigChange> DiffConfigs(const json& before, const json& after) {
  std::vector<ConfigChange> out;
  Diff(before, after, "", &out);
  return out;
}

std::vector<ConfigChange> DiffConfigs(const Config& before, const Config& after) {
  return DiffConfigs(ConfigToJson(before), ConfigToJson(after));
}

std::string DescribeChange(const ConfigChange& c) {
  return c.pointer + ": " + Shown(c.before) + " -> " + Shown(c.after) + (c.rule ? "" : " (unclassified key)");
}

std::vector<ConfigChange> RefusedByReload(const std::vector<ConfigChange>& changes) {
  std::vector<ConfigChange> out;
  for (const auto& c : changes)
    if (c.rule != ChangeRule::kLive) out.push_back(c);
  return out;
}

std::vector<ConfigChange> ResultsChanging(const std::vector<ConfigChange>& changes) {
  std::vector<ConfigChange> out;
  for (const auto& c : changes)
    if (!c.rule || *c.rule == ChangeRule::kResults) out.push_back(c);
  return out;
}

std::string ConfigFingerprint(const json& normalised) {
  const std::string text = normalised.dump();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, Fnv1a64(text.data(), text.size(), kFnvOffset));
  return hex;
}

StatusOr<RecordedConfig> ReadRecordedConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object() ||
      !j.value("epoch", json()).is_number_integer())
    return Status::Corruption(path + ": not a recorded config (want {epoch, from_round, fingerprint, config})");
  RecordedConfig r;
  r.epoch = j["epoch"].get<int>();
  r.from_round = j.value("from_round", 0);
  r.fingerprint = j.value("fingerprint", "");
  r.config = j["config"];
  if (r.fingerprint != ConfigFingerprint(r.config))
    return Status::Corruption(path + ": fingerprint " + r.fingerprint + " does not match its config");
  return r;
}

Status WriteRecordedConfig(const std::string& path, const RecordedConfig& r) {
  json j = {{"epoch", r.epoch}, {"from_round", r.from_round}, {"fingerprint", ConfigFingerprint(r.config)},
            {"config", r.config}};
  return WriteFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace ens
