// CSV loader (data_source.h). The file is read a physical line at a time (so reported line
// numbers match an editor's), twice: once to count the rows, once to parse them a chunk at a
// time. Only the selected columns are parsed: an unused text column such as an id does not
// make a file unloadable.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/config/class_list.h"
#include "common/data/data_source.h"

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

// Physical lines of a file, in order; blank ones skipped; "\r\n" endings accepted.
class LineSource {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    in_.open(path, std::ios::binary);
    if (!in_) return Status::FromInputErrno(path, errno);
    return Status::Ok();
  }
  // The next line holding anything but blanks; false at the end of the file.
  bool Next(Line* line) {
    while (std::getline(in_, text_)) {
      ++number_;
      if (!text_.empty() && text_.back() == '\r') text_.pop_back();
      if (!Trim(text_).empty()) {
        *line = {number_, text_};
        return true;
      }
    }
    return false;
  }
  // Read errors other than the end of the file.
  Status status() const { return in_.bad() ? Status::IOError("read " + path_ + ": I/O error") : Status::Ok(); }

 private:
  std::string path_;
  std::ifstream in_;
  std::string text_;
  int number_ = 0;
};

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

// Field indices of the features and the targets in header order `names`.
struct Selection {
  std::vector<int> features;
  std::vector<int> targets;  // empty: prediction input, no target
};

StatusOr<Selection> SelectColumns(const std::string& path, int header_line,
                                  const std::vector<std::string>& names,
                                  const std::vector<std::string>& feature_columns,
                                  const std::vector<std::string>& target_columns) {
  const std::string where = Where(path, header_line, 1);
  if (target_columns.empty() && feature_columns.empty())
    return Status::InvalidArgument(path + ": no target column given");
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < names.size(); ++i) index.emplace(names[i], static_cast<int>(i));
  Selection sel;
  std::unordered_map<std::string, bool> is_target;
  for (const std::string& name : target_columns) {
    const auto target = index.find(name);
    if (target == index.end()) {
      return Status::InvalidArgument(where + "target column '" + name + "' not in header");
    }
    if (!is_target.emplace(name, true).second)
      return Status::InvalidArgument(where + "target column '" + name + "' listed twice");
    sel.targets.push_back(target->second);
  }
  if (feature_columns.empty()) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (!is_target.count(names[i])) sel.features.push_back(static_cast<int>(i));
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
    if (is_target.count(name)) {
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
                const Selection& sel, LabelMap* labels, std::vector<float>* row, float* targets) {
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
  if (sel.targets.empty()) {  // prediction input: no target column
    *targets = 0.0f;
    return Status::Ok();
  }
  if (labels == nullptr) {
    for (size_t t = 0; t < sel.targets.size(); ++t) {
      const int c = sel.targets[t];
      Status s = ParseValue(fields[c], Where(path, line.number, c + 1), &targets[t]);
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }
  const std::string where = Where(path, line.number, sel.targets[0] + 1);  // a label: one target
  const std::string_view label = fields[sel.targets[0]];
  if (!label.empty() && label.front() == '"') return Status::InvalidArgument(where + "quoted fields are not supported");
  return labels->Map(CanonicalLabel(label), where, targets);
}

// A single target column as a list ("" = none: prediction input).
std::vector<std::string> OneTarget(const std::string& column) {
  return column.empty() ? std::vector<std::string>{} : std::vector<std::string>{column};
}

// Opened in two passes: Open counts the data lines and parses the header; Next parses.
class CsvReader : public RowReader {
 public:
  Status Open(const std::string& path, const std::vector<std::string>& feature_columns,
              const std::vector<std::string>& target_columns, LabelMap* labels) {
    if (labels != nullptr && target_columns.size() > 1)
      return Status::InvalidArgument(path + ": a class label is one column; " + std::to_string(target_columns.size()) +
                                     " target columns given");
    path_ = path;
    labels_ = labels;
    LineSource count;
    Status s = count.Open(path);
    if (!s.ok()) return s;
    Line line{};
    uint64_t lines = 0;
    while (count.Next(&line)) ++lines;
    if (s = count.status(); !s.ok()) return s;
    if (lines == 0) return Status::InvalidArgument(Where(path, 1, 1) + "empty file, expected a header line");
    s = source_.Open(path);
    if (!s.ok()) return s;
    Line header{};
    if (!source_.Next(&header)) return Status::IOError("read " + path + ": changed while being read");
    s = ParseHeader(path, header, &names_);
    if (!s.ok()) return s;
    StatusOr<Selection> sel = SelectColumns(path, header.number, names_, feature_columns, target_columns);
    if (!sel.ok()) return sel.status();
    if (lines == 1) return Status::InvalidArgument(Where(path, header.number, 1) + "no data rows after the header");
    sel_ = *sel;
    rows_ = lines - 1;
    columns_.features = static_cast<int>(sel_.features.size());
    for (int f : sel_.features) columns_.feature_names.push_back(names_[f]);
    columns_.targets = std::max<int>(1, static_cast<int>(sel_.targets.size()));
    columns_.target_names = target_columns.empty() ? std::vector<std::string>{""} : target_columns;
    row_.resize(sel_.features.size());
    target_.resize(static_cast<size_t>(columns_.targets));
    return Status::Ok();
  }

  const Table& columns() const override { return columns_; }
  uint64_t rows() const override { return rows_; }

  Status Next(size_t max_rows, Table* chunk) override {
    chunk->features = columns_.features;
    chunk->targets = columns_.targets;
    chunk->x.clear();
    chunk->y.clear();
    Line line{};
    while (chunk->rows() < max_rows && read_ < rows_) {
      if (!source_.Next(&line)) {
        Status s = source_.status();
        return s.ok() ? Status::IOError("read " + path_ + ": changed while being read") : s;
      }
      Status s = ParseRow(path_, line, names_.size(), sel_, labels_, &row_, target_.data());
      if (!s.ok()) return s;
      chunk->AppendRow(row_.data(), target_.data());
      ++read_;
    }
    return Status::Ok();
  }

 private:
  std::string path_;
  LabelMap* labels_ = nullptr;
  LineSource source_;
  std::vector<std::string> names_;
  Selection sel_;
  Table columns_;
  std::vector<float> row_, target_;
  uint64_t rows_ = 0, read_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<RowReader>> OpenCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                                             const std::vector<std::string>& target_columns, LabelMap* labels) {
  auto r = std::make_unique<CsvReader>();
  Status s = r->Open(path, feature_columns, target_columns, labels);
  if (!s.ok()) return s;
  return std::unique_ptr<RowReader>(std::move(r));
}

StatusOr<std::unique_ptr<RowReader>> OpenCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                                             const std::string& target_column, LabelMap* labels) {
  return OpenCsv(path, feature_columns, OneTarget(target_column), labels);
}

StatusOr<Table> LoadCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                        const std::vector<std::string>& target_columns, LabelMap* labels) {
  auto r = OpenCsv(path, feature_columns, target_columns, labels);
  if (!r.ok()) return r.status();
  return ReadAllRows(**r);
}

StatusOr<Table> LoadCsv(const std::string& path, const std::vector<std::string>& feature_columns,
                        const std::string& target_column, LabelMap* labels) {
  return LoadCsv(path, feature_columns, OneTarget(target_column), labels);
}

StatusOr<Table> ReadAllRows(RowReader& reader) {
  Table all = reader.columns();
  all.x.reserve(static_cast<size_t>(reader.rows()) * static_cast<size_t>(all.features));
  all.y.reserve(static_cast<size_t>(reader.rows()) * static_cast<size_t>(all.targets));
  Table chunk;
  while (true) {
    Status s = reader.Next(size_t{1} << 16, &chunk);
    if (!s.ok()) return s;
    if (chunk.rows() == 0) return all;
    all.AppendRows(chunk);
  }
}

}  // namespace ens
