#include "common/config/class_list.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace ens {
namespace {

std::optional<int64_t> IntegerLabel(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || (s.size() == 1 && s[0] == '-')) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The first few classes, for messages.
std::string Listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  return names.size() > 8 ? out + ", ..." : out;
}

}  // namespace

std::string CanonicalLabel(std::string_view label) {
  auto v = IntegerLabel(label);
  return v ? std::to_string(*v) : std::string(label);
}

Status LabelCollector::Map(const std::string& label, const std::string& where, float* target) {
  if (label.empty()) return Status::InvalidArgument(where + "empty label");
  auto it = counts_.find(label);
  if (it == counts_.end()) {
    if (counts_.size() >= kMaxClasses)
      return Status::InvalidArgument(where + "label '" + label + "' is a class beyond the " +
                                     std::to_string(kMaxClasses) + " that classification allows");
    it = counts_.emplace(label, 0).first;
  }
  ++it->second;
  *target = 0.0f;
  return Status::Ok();
}

StatusOr<ClassList> ClassList::FromLabels(const std::vector<std::string>& labels, const std::string& origin) {
  std::vector<std::string> names = labels;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.size() < 2)
    return Status::InvalidArgument(origin + ": classification needs at least 2 classes, the target has " +
                                   (names.empty() ? std::string("none") : "only '" + names[0] + "'"));
  if (names.size() > kMaxClasses)
    return Status::InvalidArgument(origin + ": " + std::to_string(names.size()) + " classes, more than the " +
                                   std::to_string(kMaxClasses) + " classification allows");
  const bool integers =
      std::all_of(names.begin(), names.end(), [](const std::string& n) { return IntegerLabel(n).has_value(); });
  if (integers)
    std::sort(names.begin(), names.end(),
              [](const std::string& a, const std::string& b) { return *IntegerLabel(a) < *IntegerLabel(b); });
  ClassList c;
  c.names_ = std::move(names);
  for (size_t i = 0; i < c.names_.size(); ++i) c.index_.emplace(c.names_[i], static_cast<int>(i));
  return c;
}

StatusOr<ClassList> ClassList::FromJson(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_array()) return Status::Corruption(origin + ": \"classes\" is not an array");
  std::vector<std::string> names;
  for (const auto& n : j) {
    if (!n.is_string()) return Status::Corruption(origin + ": \"classes\" holds a non-string");
    names.push_back(n.get<std::string>());
  }
  auto c = FromLabels(names, origin);
  if (!c.ok()) return Status::Corruption(c.status().message());
  if (c->names_ != names) return Status::Corruption(origin + ": \"classes\" is not a sorted list of distinct labels");
  return c;
}

int ClassList::Index(const std::string& label) const {
  auto it = index_.find(label);
  return it == index_.end() ? -1 : it->second;
}

Status ClassList::Lookup(const std::string& label, const std::string& where, float* target) const {
  const int i = Index(label);
  if (i < 0)
    return Status::InvalidArgument(where + "label '" + label + "' is not one of the run's " +
                                   std::to_string(names_.size()) + " classes (" + Listed(names_) + ")");
  *target = static_cast<float>(i);
  return Status::Ok();
}

}  // namespace ens
