// The reader every ensembled config file is checked with: the run config (common/config/config.cpp)
// and the serve config (orchestrator/serve/serve_config.h). A Validator records each problem as
// "<JSON pointer>: <message>" and carries on, so a user fixes every mistake in one edit;
// unknown keys are errors (with a suggestion when one is close). The section readers shared
// by both files (ReadGpus, ReadService) and the parse step (syntax errors, duplicate keys)
// are declared at the end. Header-only apart from those; thread-compatible.
#pragma once

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/config.h"
#include "common/config/config_keys.h"
#include "common/config/member_options.h"

namespace ens::config_detail {

using json = nlohmann::json;
using Words = std::span<const std::string_view>;
// The keys of an object (common/config/config_keys.h).
using Keys = std::span<const ConfigKey>;

// RFC 6901: '~' and '/' inside a key are escaped so the pointer stays unambiguous.
inline std::string Child(const std::string& ptr, std::string_view key) { return PointerChild(ptr, key); }
inline std::string Child(const std::string& ptr, size_t index) {
  return ptr + "/" + std::to_string(index);
}

// Optimal string alignment distance: a swapped pair ("epcohs") counts as one edit.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// " (did you mean 'x'?)" when one candidate is plausibly what was meant, else "".
inline std::string Suggestion(std::string_view word, Words candidates) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (std::string_view c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_distance) best_distance = d, best = c;
  }
  return best.empty() ? "" : " (did you mean '" + std::string(best) + "'?)";
}

inline std::string Join(Words words) {
  std::string out;
  for (std::string_view w : words) out += (out.empty() ? "" : ", ") + std::string(w);
  return out;
}

// What the user wrote, short enough for a one-line message.
inline std::string Shown(const json& j) {
  if ((j.is_object() || j.is_array()) && !j.empty()) return std::string("an ") + j.type_name();
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// A name that is also a plain file name: never ".", "..", a hidden file or a path.
inline bool IsSafeName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] == '.') return false;
  for (unsigned char c : s) {
    if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

inline std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty() || base_dir.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

inline const json* Find(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// Bounds of a real-valued field; NaN fails every bound. `rule` is the message.
struct Range {
  double lo, hi;
  bool lo_open, hi_open;
  const char* rule;
  bool Contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr Range kPositive{0, kInf, true, true, "must be a number > 0"};
inline constexpr Range kNonNegative{0, kInf, false, true, "must be a number >= 0"};
inline constexpr Range kFraction{0, 1, false, true, "must be a number in [0, 1)"};
inline constexpr Range kOpenFraction{0, 1, true, true, "must be a number in (0, 1)"};

// Collects every error; each reader checks one optional field of an object. A reader
// leaves *out untouched when the key is absent or invalid and returns true only when the
// key was present and valid.
class Validator {
 public:
  void Error(const std::string& ptr, const std::string& msg) {
    // Variants are resolved once per member; the same mistake is still one error.
    if (seen_.insert(ptr + '\n' + msg).second) errors_.push_back({ptr, msg});
  }
  void Expect(const std::string& ptr, const std::string& what, const json& got,
              const std::string& hint = "") {
    Error(ptr, what + ", got " + Shown(got) + hint);
  }
  bool ok() const { return errors_.empty(); }
  bool HasErrorAt(const std::string& ptr) const {
    return std::any_of(errors_.begin(), errors_.end(),
                       [&](const ConfigError& e) { return e.pointer == ptr; });
  }
  std::vector<ConfigError> Take() { return std::move(errors_); }

  // True when j is an object; reports each key not in `known`.
  bool Object(const json& j, const std::string& ptr, Keys known) {
    if (!j.is_object()) {
      Expect(ptr, "must be an object", j);
      return false;
    }
    std::vector<std::string_view> names;
    for (const ConfigKey& k : known) names.push_back(k.name);
    for (const auto& [key, value] : j.items()) {
      if (std::find(names.begin(), names.end(), key) == names.end()) {
        Error(Child(ptr, key), "unknown key '" + key + "'" + Suggestion(key, names));
      }
    }
    return true;
  }

  // The object at obj[key] with its keys checked, or nullptr when absent or not an object.
  const json* Section(const json& obj, const std::string& ptr, std::string_view key, Keys known) {
    const json* j = Find(obj, key);
    return j != nullptr && Object(*j, Child(ptr, key), known) ? j : nullptr;
  }

  bool Int(const json& obj, const std::string& ptr, std::string_view key, int lo, int hi,
           int* out) {
    std::string what = hi == INT_MAX ? "must be an integer >= " + std::to_string(lo)
                                     : "must be an integer in [" + std::to_string(lo) + ", " +
                                           std::to_string(hi) + "]";
    return Read(obj, ptr, key, out, what, [&](const json& j) {
      // Past INT_MAX (maybe past int64_t) only as unsigned, and then out of range anyway.
      if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > INT_MAX)) {
        return false;
      }
      return j.get<int64_t>() >= lo && j.get<int64_t>() <= hi;
    });
  }
  bool Unsigned(const json& obj, const std::string& ptr, std::string_view key, uint64_t* out) {
    return Read(obj, ptr, key, out, "must be an unsigned 64-bit integer",
                [](const json& j) { return j.is_number_unsigned(); });
  }
  bool Number(const json& obj, const std::string& ptr, std::string_view key, Range range,
              double* out) {
    return Read(obj, ptr, key, out, range.rule,
                [&](const json& j) { return j.is_number() && range.Contains(j.get<double>()); });
  }
  bool Bool(const json& obj, const std::string& ptr, std::string_view key, bool* out) {
    return Read(obj, ptr, key, out, "must be true or false",
                [](const json& j) { return j.is_boolean(); });
  }
  // A string that `valid` accepts; `what` states the rule for the message.
  bool String(const json& obj, const std::string& ptr, std::string_view key, std::string* out,
              const std::string& what = "must be a non-empty string",
              const std::function<bool(const std::string&)>& valid = NonEmpty,
              const std::string& hint = "") {
    return Read(
        obj, ptr, key, out, what,
        [&](const json& j) { return j.is_string() && valid(j.get_ref<const std::string&>()); },
        hint);
  }
  bool Name(const json& obj, const std::string& ptr, std::string_view key, std::string* out) {
    return String(obj, ptr, key, out, "must be 1-64 characters of [A-Za-z0-9_.-], not starting with '.'", IsSafeName);
  }
  bool Enum(const json& obj, const std::string& ptr, std::string_view key, Words allowed,
            std::string* out) {
    auto listed = [&](const std::string& s) {
      return std::find(allowed.begin(), allowed.end(), s) != allowed.end();
    };
    // The suggestion only for a string that is not listed: edit distances to every allowed
    // name cost more than the rest of the check (a worker reads every task's member this way).
    const json* j = Find(obj, key);
    std::string hint = j && j->is_string() && !listed(j->get_ref<const std::string&>())
                           ? Suggestion(j->get_ref<const std::string&>(), allowed)
                           : "";
    return String(obj, ptr, key, out, "must be one of " + Join(allowed), listed, hint);
  }
  // A member option, given by its name in member_options.h and stored as its enum.
  template <typename E>
  bool Enum(const json& obj, const std::string& ptr, std::string_view key, E* out) {
    std::string name;
    if (!Enum(obj, ptr, key, NamesOf(E{}), &name)) return false;
    *out = *Parse<E>(name);  // Enum accepted only a listed name, so Parse succeeds
    return true;
  }
  bool Path(const json& obj, const std::string& ptr, std::string_view key,
            const std::string& base_dir, std::string* out) {
    if (!String(obj, ptr, key, out)) return false;
    *out = ResolvePath(base_dir, *out);
    return true;
  }
  // An array of strings; `allow_empty` is for argv, where "" is a legitimate argument.
  bool Strings(const json& obj, const std::string& ptr, std::string_view key, bool allow_empty,
               std::vector<std::string>* out) {
    const json* j = Find(obj, key);
    if (j == nullptr) return false;
    const std::string p = Child(ptr, key);
    if (!j->is_array()) {
      Expect(p, "must be an array of strings", *j);
      return false;
    }
    std::vector<std::string> items;
    for (size_t i = 0; i < j->size(); ++i) {
      const json& item = (*j)[i];
      if (item.is_string() && (allow_empty || !item.get_ref<const std::string&>().empty())) {
        items.push_back(item.get<std::string>());
      } else {
        Expect(Child(p, i), allow_empty ? "must be a string" : "must be a non-empty string", item);
      }
    }
    if (items.size() != j->size()) return false;
    *out = std::move(items);
    return true;
  }

 private:
  static bool NonEmpty(const std::string& s) { return !s.empty(); }

  // The shape every reader shares: `accept` says whether the JSON value keeps the rule
  // that `what` states.
  template <typename T, typename Accept>
  bool Read(const json& obj, const std::string& ptr, std::string_view key, T* out,
            const std::string& what, Accept accept, const std::string& hint = "") {
    const json* j = Find(obj, key);
    if (j == nullptr) return false;
    if (!accept(*j)) {
      Expect(Child(ptr, key), what, *j, hint);
      return false;
    }
    *out = j->get<T>();
    return true;
  }

  std::vector<ConfigError> errors_;
  std::set<std::string> seen_;
};

// resources.gpus of `obj` (at `ptr`): "auto", "none", a count in [1, 4096] or a list of indices/UUIDs.
void ReadGpus(Validator& v, const json& obj, const std::string& ptr, GpuSelection* out);
// The "service" section of `root` (control_socket, http_port, http_bind, log_file).
void ReadService(Validator& v, const json& root, const std::string& base_dir, ServiceSpec* sv);
// JSON with comments; duplicate keys are reported to `v`. nullopt on a syntax error, which is
// then the one error in *fatal.
std::optional<json> ParseDocument(const std::string& text, Validator& v, std::vector<ConfigError>* fatal);
// "<pointer>: <message>", or the message alone for the whole document.
std::string FormatError(const ConfigError& e);

}  // namespace ens::config_detail
