// ConfigChange: what differs between two configs, and which differences a live reload or a
// resume may apply. One comparison for both paths: the normalised configs (ConfigToJson) are
// compared key by key and every difference is classified by the one key table
// (common/config/config_keys.h).
//  - `ensemblectl reload` applies only kLive changes (at the next round boundary).
//  - `ensembled run` on an existing state directory applies kLive and kRestart changes and logs
//    each; a kResults (or unclassified) change is refused with exit 78 unless the run is started
//    with --accept-config-change, which opens a new config epoch at the next uncommitted round.
// The config a run uses is recorded in state_dir/config.json (RecordedConfig) with its epoch,
// the round it applies from and a fingerprint. Pure functions except the file helpers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/config.h"
#include "common/config/config_keys.h"
#include "common/base/status.h"

namespace ens {

struct ConfigChange {
  std::string pointer;             // RFC 6901 into the normalised config
  nlohmann::json before, after;    // null where the key is absent on that side
  std::optional<ChangeRule> rule;  // nullopt: the key table does not classify it
};

// Differences key by key: objects are compared per key, lists of equal length per element,
// anything else (and lists of another length) as a whole.
std::vector<ConfigChange> DiffConfigs(const nlohmann::json& before, const nlohmann::json& after);
std::vector<ConfigChange> DiffConfigs(const Config& before, const Config& after);
// "/members/list/3/lr: 0.003 -> 0.01" (long values shortened).
std::string DescribeChange(const ConfigChange& c);
// What a live reload refuses: every change that is not kLive.
std::vector<ConfigChange> RefusedByReload(const std::vector<ConfigChange>& changes);
// What a resume refuses without --accept-config-change: kResults and unclassified changes.
std::vector<ConfigChange> ResultsChanging(const std::vector<ConfigChange>& changes);

// state_dir/config.json.
struct RecordedConfig {
  int epoch = 0;          // 0 at run start, +1 per accepted results-changing change
  int from_round = 0;     // the first round this config applies to
  std::string fingerprint;  // FNV-1a 64 (hex) of the normalised config's compact JSON
  nlohmann::json config;  // ConfigToJson
};
std::string ConfigFingerprint(const nlohmann::json& normalised);
// NotFound when absent (a run started by an older version); Corruption naming the path.
StatusOr<RecordedConfig> ReadRecordedConfig(const std::string& path);
Status WriteRecordedConfig(const std::string& path, const RecordedConfig& r);

}  // namespace ens
