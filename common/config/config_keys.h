// ConfigKeys: every key of the config file, and what a change to it does to a run.
//
// One table, used by the config reader (a key not in it is "unknown") and by every comparison
// of two configs: a live `ensemblectl reload`, and `ensembled run` resuming a state directory
// whose recorded config differs (orchestrator/run/config_change.h). A key cannot be added to the
// reader without a rule, and tests/config_change_test.cpp fails when the normalised config
// (ConfigToJson) holds a key the table does not classify.
//
//  kLive     applied at the next round boundary by a reload, and on resume: rounds,
//            mutation.k, mutation.timeout_s, heartbeat_timeout_s, max_task_attempts,
//            min_members, stop_timeout_s, recycle.*
//  kRestart  applied on resume, refused by a live reload (the process layout): service.*,
//            run_name, state_dir (a state directory moved to a bigger disk is the same run)
//  kResults  changes what members compute or which members there are: everything else.
//            Refused on resume unless `ensembled run --accept-config-change`.
// Pure data. Thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ens {

enum class ChangeRule { kLive, kRestart, kResults };

struct ConfigKey {
  std::string_view name;
  ChangeRule rule;
  std::span<const ConfigKey> children;  // keys of an object value; empty for a leaf
};

// The top level of a config file.
std::span<const ConfigKey> ConfigTopKeys();
// The keys of the object at `parent` ("" = top level, "/resources", "/members/defaults", ...)
// in the file format; the member keys for any member object. Empty when not an object of
// the format.
std::span<const ConfigKey> ConfigKeysOf(std::string_view table);

// ptr + "/" + key as RFC 6901 writes it ('~' -> "~0", '/' -> "~1").
std::string PointerChild(const std::string& ptr, std::string_view key);

// The rule for a JSON pointer into a normalised config: the rule of the deepest key of the
// table on its path (deeper parts, e.g. "/members/3/lr", take their ancestor's rule). nullopt
// when its first key is not in the table (unclassified).
std::optional<ChangeRule> RuleFor(const std::string& pointer);

}  // namespace ens
