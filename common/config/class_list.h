// ClassList: the classes of a classification run, fixed when the run starts.
//
// A label is the target column's text (CSV) or an integer (npy). Integer labels compare by
// value ("07" and "7" are one class, written "7"); any other text is its own label. The list
// holds every distinct label of the run's files (train, holdout and pool), sorted: by value
// when every label is an integer (so npy labels 0..9 are classes 0..9), else bytewise. It is
// written to run.json ("classes") and read back on resume; the table stores a row's class as
// its index, a float (exact: there are at most kMaxClasses).
//
// Loaders turn a label into the stored target through a LabelMap: a LabelCollector while the
// files are first scanned (it counts), then the ClassList (a label not in it is an error
// naming the place). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

inline constexpr size_t kMaxClasses = 10000;

// A label's canonical text: an integer ([+-]digits, within int64) as std::to_string writes it,
// anything else unchanged.
std::string CanonicalLabel(std::string_view label);

class LabelMap {
 public:
  virtual ~LabelMap() = default;
  // The stored target of `label` (canonical text) into *target. `where` prefixes an error
  // ("file:line:column: " or "file: element 3 (row 3): ").
  virtual Status Map(const std::string& label, const std::string& where, float* target) = 0;
};

// Counts distinct labels; refuses a label beyond the kMaxClasses-th. Stores 0 as the target.
class LabelCollector : public LabelMap {
 public:
  Status Map(const std::string& label, const std::string& where, float* target) override;
  const std::map<std::string, uint64_t>& counts() const { return counts_; }

 private:
  std::map<std::string, uint64_t> counts_;
};

class ClassList : public LabelMap {
 public:
  ClassList() = default;
  // From distinct canonical labels. Errors (naming `origin`): fewer than 2, more than kMaxClasses.
  static StatusOr<ClassList> FromLabels(const std::vector<std::string>& labels, const std::string& origin);
  // run.json's "classes" (an array of strings); `origin` names the file in errors.
  static StatusOr<ClassList> FromJson(const nlohmann::json& j, const std::string& origin);
  nlohmann::json ToJson() const { return names_; }

  int size() const { return static_cast<int>(names_.size()); }
  bool empty() const { return names_.empty(); }
  const std::vector<std::string>& names() const { return names_; }
  // The index of a canonical label, -1 when it is not a class.
  int Index(const std::string& label) const;
  // The class index of `label` as a float; errors say "label 'x' is not one of the run's N
  // classes (a, b, ...)", after `where`.
  Status Lookup(const std::string& label, const std::string& where, float* target) const;
  Status Map(const std::string& label, const std::string& where, float* target) override {
    return Lookup(label, where, target);
  }

 private:
  std::vector<std::string> names_;
  std::map<std::string, int> index_;
};

}  // namespace ens
