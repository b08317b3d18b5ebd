// CSV loader (data_source.h). The whole file is read at once, split into physical lines
// (so reported line numbers match an editor's), and only the selected columns are parsed:
// an unused text column such as an id does not make a file unloadable.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/atomic_file.h"
#include "common/data_source.h"

namespace ens {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(Trim(line.substr(start)));
      return fields;
    }
    fields.push_back(Trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

// One physical line: its 1-based number and its text without the line ending.
struct Line {
  int number;
  std::string_view text;
};

// Lines that hold anything but blanks; "\r\n" endings are accepted.
std::vector<Line> NonEmptyLines(std::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    if (!Trim(line).empty()) lines.push_back({number, line});
    start = end + 1;
  }
  return lines;
}

std::string Where(const std::string& path, int line, int column) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

Status ParseValue(std::string_view field, const std::string& where, float* out) {
  if (field.empty()) return Status::InvalidArgument(where + "empty value");
  if (field.front() == '"') {
    return Status::InvalidArgument(where + "quoted fields are not supported");
  }
  std::string_view digits = field;
  // from_chars rejects a leading '+', which spreadsheets sometimes write.
  if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-' && digits[1] != '+') {
    digits.remove_prefix(1);
  }
  float v = 0.0f;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  const std::string quoted = "'" + std::string(field) + "'";
  if (ec == std::errc::result_out_of_range) {
    return Status::InvalidArgument(where + "value " + quoted + " is out of float32 range");
  }
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Status::InvalidArgument(where + "cannot parse " + quoted + " as a number");
  }
  if (!std::isfinite(v)) return Status::InvalidArgument(where + "non-finite value " + quoted);
  *out = v;
  return Status::Ok();
}

// The header's column names, checked for quotes, empties and duplicates.
Status ParseHeader(const std::string& path, const Line& line, std::vector<std::string>* names) {
  const std::vector<std::string_view> fields = SplitFields(line.text);
  std::unordered_map<std::string_view, int> seen;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string where = Where(path, line.number, static_cast<int>(i) + 1);
    const std::string_view name = fields[i];
    if (name.empty()) return Status::InvalidArgument(where + "empty column name in header");
    if (name.front() == '"') {
      return Status::InvalidArgument(where + "quoted fields are not supported");
    }
    const auto [it, inserted] = seen.emplace(name, static_cast<int>(i) + 1);
    if (!inserted) {
      return Status::InvalidArgument(where + "duplicate column name '" + std::string(name) +
                                     "' (first at column " + std::to_string(it->second) + ")");
    }
    names->emplace_back(name);
  }
  return Status::Ok();
}

// Field indices of the features and the target in header order `names`.
struct Selection {
  std::vector<int> features;
  int target = -1;
};

StatusOr<Selection> SelectColumns(const std::string& path, int header_line,
                                  const std::vector<std::string>& names,
                                  const std::vector<std::string>& feature_columns,
                                  const std::string& target_column) {
  const std::string where = Where(path, header_line, 1);
  if (target_column.empty() && feature_columns.empty())
    return Status::InvalidArgument(path + ": no target column given");
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < names.size(); ++i) index.emplace(names[i], static_cast<int>(i));
  Selection sel;
  if (!target_column.empty()) {
    const auto target = index.find(target_column);
    if (target == index.end()) {
      return Status::InvalidArgument(where + "target column '" + target_column + "' not in header");
    }
    sel.target = target->second;
  }
  if (feature_columns.empty()) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (static_cast<int>(i) != sel.target) sel.features.push_back(static_cast<int>(i));
    }
    if (sel.features.empty()) {
      return Status::InvalidArgument(where + "no feature columns besides the target");
    }
    return sel;
  }
  std::unordered_map<std::string, bool> listed;
  for (const std::string& name : feature_columns) {
    const auto it = index.find(name);
    if (it == index.end()) {
      return Status::InvalidArgument(where + "feature column '" + name + "' not in header");
    }
    if (name == target_column) {
      return Status::InvalidArgument(where + "column '" + name + "' is both target and feature");
    }
    if (!listed.emplace(name, true).second) {
      return Status::InvalidArgument(where + "feature column '" + name + "' listed twice");
    }
    sel.features.push_back(it->second);
  }
  return sel;
}

Status ParseRow(const std::string& path, const Line& line, size_t field_count,
                const Selection& sel, std::vector<float>* row, float* target) {
  const std::vector<std::string_view> fields = SplitFields(line.text);
  if (fields.size() != field_count) {
    const int column = static_cast<int>(std::min(fields.size(), field_count)) + 1;
    return Status::InvalidArgument(Where(path, line.number, column) + "expected " +
                                   std::to_string(field_count) + " fields, found " +
                                   std::to_string(fields.size()));
  }
  for (size_t c = 0; c < sel.features.size(); ++c) {
    const int f = sel.features[c];
    Status s = ParseValue(fields[f], Where(path, line.number, f + 1), &(*row)[c]);
    if (!s.ok()) return s;
  }
  if (sel.target < 0) {  // prediction input: no target column
    *target = 0.0f;
    return Status::Ok();
  }
  return ParseValue(fields[sel.target], Where(path, line.number, sel.target + 1), target);
}

}  // namespace

StatusOr<Table> LoadCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                        const std::string& target_column) {
  StatusOr<std::string> file = ReadFile(path);
  if (!file.ok()) return file.status();
  const std::string& text = *file;
  const std::vector<Line> lines = NonEmptyLines(text);
  if (lines.empty()) {
    return Status::InvalidArgument(Where(path, 1, 1) + "empty file, expected a header line");
  }
  std::vector<std::string> names;
  Status s = ParseHeader(path, lines[0], &names);
  if (!s.ok()) return s;
  StatusOr<Selection> sel =
      SelectColumns(path, lines[0].number, names, feature_columns, target_column);
  if (!sel.ok()) return sel.status();
  if (lines.size() == 1) {
    return Status::InvalidArgument(Where(path, lines[0].number, 1) +
                                   "no data rows after the header");
  }

  Table t;
  t.features = static_cast<int>(sel->features.size());
  for (int f : sel->features) t.feature_names.push_back(names[f]);
  t.target_name = target_column;
  t.x.reserve((lines.size() - 1) * sel->features.size());
  t.y.reserve(lines.size() - 1);
  std::vector<float> row(sel->features.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    float target = 0.0f;
    s = ParseRow(path, lines[i], names.size(), *sel, &row, &target);
    if (!s.ok()) return s;
    t.AppendRow(row.data(), target);
  }
  return t;
}

}  // namespace ens
