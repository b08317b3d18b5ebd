// .npy loader (data_source.h). Supports what numpy.save writes for float arrays: format
// versions 1.0-3.0, a Python-literal header dict with 'descr', 'fortran_order' and 'shape',
// little-endian <f4 or <f8 data in C order. Everything else is rejected with a message
// naming the file, never guessed at.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config/class_list.h"
#include "common/data/data_source.h"
#include "common/base/fd_io.h"

namespace ens {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader copies little-endian data as-is");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

uint32_t LittleEndian(const std::string& bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return v;
}

// The header dict, as far as this loader needs it.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;
};

// A minimal reader for the Python literal numpy writes: {'key': value, ...} where a value
// is a quoted string, True/False, or a tuple of non-negative integers.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // On failure returns false with *error describing the problem.
  bool Parse(NpyHeader* out, std::string* error) {
    bool have_descr = false, have_order = false, have_shape = false;
    if (!Consume('{')) return Fail("header is not a dict", error);
    while (!Consume('}')) {
      std::string key;
      if (!ReadString(&key) || !Consume(':')) return Fail("malformed header dict", error);
      bool ok = true;
      if (key == "descr") {
        ok = ReadString(&out->descr);
        have_descr = true;
      } else if (key == "fortran_order") {
        ok = ReadBool(&out->fortran_order);
        have_order = true;
      } else if (key == "shape") {
        ok = ReadTuple(&out->shape);
        have_shape = true;
      } else {
        return Fail("unexpected header key '" + key + "'", error);
      }
      if (!ok) return Fail("malformed value for header key '" + key + "'", error);
      if (!Consume(',') && !Peek('}')) return Fail("malformed header dict", error);
    }
    if (!have_descr || !have_order || !have_shape) {
      return Fail("header lacks 'descr', 'fortran_order' or 'shape'", error);
    }
    return true;
  }

 private:
  static bool Fail(const std::string& why, std::string* error) {
    *error = why;
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  bool ReadString(std::string* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool ReadBool(bool* out) {
    SkipSpace();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        *out = value;
        return true;
      }
    }
    return false;
  }
  bool ReadUint(uint64_t* out) {
    SkipSpace();
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
      v = v * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
    }
    *out = v;
    return pos_ > start;
  }
  bool ReadTuple(std::vector<uint64_t>* out) {
    if (!Consume('(')) return false;
    while (!Consume(')')) {
      uint64_t dim = 0;
      if (!ReadUint(&dim)) return false;
      out->push_back(dim);
      if (!Consume(',') && !Peek(')')) return false;
    }
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Splits off the header; *data_offset is where the array bytes begin.
Status ReadHeader(const std::string& path, const std::string& bytes, NpyHeader* header,
                  size_t* data_offset) {
  if (bytes.size() < kMagicSize + 2 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    return Status::Corruption(path + ": not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicSize]);
  if (major < 1 || major > 3) {
    return Status::InvalidArgument(path + ": unsupported .npy format version " +
                                   std::to_string(major));
  }
  const size_t len_width = (major == 1) ? 2 : 4;
  const size_t prefix = kMagicSize + 2 + len_width;
  if (bytes.size() < prefix) return Status::Corruption(path + ": truncated .npy header");
  const size_t header_len = LittleEndian(bytes, kMagicSize + 2, len_width);
  if (bytes.size() - prefix < header_len) {
    return Status::Corruption(path + ": truncated .npy header");
  }
  std::string error;
  HeaderParser parser(std::string_view(bytes).substr(prefix, header_len));
  if (!parser.Parse(header, &error)) return Status::Corruption(path + ": " + error);
  *data_offset = prefix + header_len;
  return Status::Ok();
}

// Element count of `shape`, or false when count * 16 would overflow (so byte sizes of
// 8-byte items are always representable).
bool ElementCount(const std::vector<uint64_t>& shape, uint64_t* count) {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 16 / d) return false;
    n *= d;
  }
  *count = n;
  return true;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) s += ",";
    if (i + 1 < shape.size()) s += " ";
  }
  return s + ")";
}

// "element i (row r, column c)" for a 2-D array, "element i (row i)" otherwise.
std::string ElementPlace(const std::vector<uint64_t>& shape, uint64_t i) {
  std::string s = "element " + std::to_string(i);
  if (shape.size() == 2 && shape[1] > 0) {
    return s + " (row " + std::to_string(i / shape[1]) + ", column " +
           std::to_string(i % shape[1]) + ")";
  }
  return s + " (row " + std::to_string(i) + ")";
}

// Converts count raw values (elements first.. of the array) to float32, rejecting NaN/Inf
// (and f8 values beyond float range).
template <typename T>
Status ConvertValues(const std::string& path, const char* data, const std::vector<uint64_t>& shape,
                     uint64_t first, uint64_t count, float* out) {
  for (uint64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    const float f = static_cast<float>(v);
    if (!std::isfinite(f)) {
      const char* why = std::isfinite(v) ? "value out of float32 range" : "non-finite value";
      return Status::InvalidArgument(path + ": " + why + " at " + ElementPlace(shape, first + i));
    }
    out[i] = f;
  }
  return Status::Ok();
}

// One .npy file open for reading a range of elements at a time (pread: no whole-file copy).
class NpyFile {
 public:
  NpyFile() = default;
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;
  ~NpyFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  // `labels`: integer dtypes are accepted too (ReadLabels only).
  Status Open(const std::string& path, bool labels = false) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::FromInputErrno(path, errno);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(path, errno);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    // The prefix (magic, version, header length), then the header it announces.
    std::string bytes(static_cast<size_t>(std::min<uint64_t>(size, kMagicSize + 6)), '\0');
    Status s = Read(bytes.data(), bytes.size(), 0);
    if (!s.ok()) return s;
    if (bytes.size() >= kMagicSize + 2 && bytes.compare(0, kMagicSize, kMagic, kMagicSize) == 0) {
      const int major = static_cast<unsigned char>(bytes[kMagicSize]);
      const size_t width = major == 1 ? 2 : 4;
      if (bytes.size() >= kMagicSize + 2 + width) {
        const uint64_t want = kMagicSize + 2 + width + LittleEndian(bytes, kMagicSize + 2, width);
        bytes.resize(static_cast<size_t>(std::min(size, want)));
        s = Read(bytes.data(), bytes.size(), 0);
        if (!s.ok()) return s;
      }
    }
    NpyHeader header;
    size_t offset = 0;
    s = ReadHeader(path, bytes, &header, &offset);
    if (!s.ok()) return s;
    if (header.fortran_order) {
      return Status::InvalidArgument(path + ": fortran_order arrays are not supported (save in C order)");
    }
    const std::string& d = header.descr;
    const bool is_float = d == "<f4" || d == "<f8";
    const bool is_int = d.size() == 3 && (d[0] == '<' || d[0] == '|') && (d[1] == 'i' || d[1] == 'u') &&
                        (d[2] == '1' || d[2] == '2' || d[2] == '4' || d[2] == '8') && (d[0] == '|') == (d[2] == '1');
    if (!is_float && !(labels && is_int)) {
      return Status::InvalidArgument(path + ": unsupported dtype '" + d + "' (want <f4 or <f8" +
                                     (labels ? ", or an integer dtype for labels)" : ")"));
    }
    item_ = static_cast<size_t>(d[2] - '0');
    kind_ = d[1];
    uint64_t count = 0;
    if (!ElementCount(header.shape, &count)) {
      return Status::Corruption(path + ": shape " + ShapeText(header.shape) + " is too large");
    }
    const uint64_t want = count * item_, have = size - offset;
    if (have != want) {
      return Status::Corruption(path + ": " + (have < want ? "truncated" : "trailing bytes") + ": shape " +
                                ShapeText(header.shape) + " needs " + std::to_string(want) +
                                " data bytes, file has " + std::to_string(have));
    }
    shape_ = header.shape;
    data_offset_ = offset;
    return Status::Ok();
  }

  const std::vector<uint64_t>& shape() const { return shape_; }

  // Elements [first, first + count) as labels (whole numbers) stored through `labels`.
  Status ReadLabels(uint64_t first, uint64_t count, LabelMap* labels, float* out) {
    buf_.resize(static_cast<size_t>(count * item_));
    Status s = Read(buf_.data(), buf_.size(), data_offset_ + first * item_);
    for (uint64_t i = 0; s.ok() && i < count; ++i) {
      const char* p = buf_.data() + i * item_;
      const std::string where = path_ + ": " + ElementPlace(shape_, first + i) + ": ";
      std::string label;
      if (kind_ == 'f') {
        double v = 0;
        if (item_ == 4) {
          float f;
          std::memcpy(&f, p, 4);
          v = f;
        } else {
          std::memcpy(&v, p, 8);
        }
        if (!std::isfinite(v) || v != std::floor(v) || std::abs(v) > 9.0e15) {
          char text[32];
          std::snprintf(text, sizeof text, "%.9g", v);
          return Status::InvalidArgument(where + "label " + text + " is not an integer (class labels in npy are integers)");
        }
        label = std::to_string(static_cast<int64_t>(v));
      } else if (kind_ == 'u') {
        uint64_t v = 0;
        std::memcpy(&v, p, item_);  // little-endian: the low bytes
        label = std::to_string(v);
      } else {
        uint64_t raw = 0;
        std::memcpy(&raw, p, item_);
        const int shift = static_cast<int>(64 - 8 * item_);
        label = std::to_string(static_cast<int64_t>(raw << shift) >> shift);  // sign-extended
      }
      s = labels->Map(label, where, &out[i]);
    }
    return s;
  }

  // Elements [first, first + count) as float32 into out. REQUIRES: a float dtype.
  Status ReadValues(uint64_t first, uint64_t count, float* out) {
    buf_.resize(static_cast<size_t>(count * item_));
    Status s = Read(buf_.data(), buf_.size(), data_offset_ + first * item_);
    if (!s.ok()) return s;
    return item_ == 4 ? ConvertValues<float>(path_, buf_.data(), shape_, first, count, out)
                      : ConvertValues<double>(path_, buf_.data(), shape_, first, count, out);
  }

 private:
  Status Read(char* dst, size_t n, uint64_t offset) { return PreadFull(fd_, dst, n, offset, path_); }

  std::string path_;
  int fd_ = -1;
  size_t item_ = 4;
  char kind_ = 'f';  // f, i or u
  uint64_t data_offset_ = 0;
  std::vector<uint64_t> shape_;
  std::vector<char> buf_;
};

// X (rows, features) and y (rows,) or (rows, targets), a chunk of rows at a time.
class NpyPairReader : public RowReader {
 public:
  Status Open(const std::string& x_path, const std::string& y_path, LabelMap* labels) {
    labels_ = labels;
    Status s = x_.Open(x_path);
    if (!s.ok()) return s;
    const auto& xs = x_.shape();
    if (xs.size() != 2 || xs[0] == 0 || xs[1] == 0) {
      return Status::InvalidArgument(x_path + ": X must have shape (rows, features) with both >= 1, found " +
                                     ShapeText(xs));
    }
    if (xs[1] > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      return Status::InvalidArgument(x_path + ": too many features " + ShapeText(xs));
    }
    s = y_.Open(y_path, labels != nullptr);
    if (!s.ok()) return s;
    const auto& ys = y_.shape();
    rows_ = xs[0];
    const bool columns = ys.size() == 2 && ys[1] >= 1 && ys[1] <= static_cast<uint64_t>(kMaxTargets);
    if (!(ys.size() == 1 || columns) || ys[0] != rows_) {
      return Status::InvalidArgument(y_path + ": y must have shape (" + std::to_string(rows_) + ",) or (" +
                                     std::to_string(rows_) + ", targets) with 1 <= targets <= " +
                                     std::to_string(kMaxTargets) + " to match " + x_path + ", found " +
                                     ShapeText(ys));
    }
    columns_.features = static_cast<int>(xs[1]);
    for (int c = 0; c < columns_.features; ++c) columns_.feature_names.push_back("x" + std::to_string(c));
    columns_.targets = ys.size() == 2 ? static_cast<int>(ys[1]) : 1;
    if (labels != nullptr && columns_.targets > 1)
      return Status::InvalidArgument(y_path + ": class labels must be one column, found " + ShapeText(ys));
    columns_.target_names = {"y"};
    if (columns_.targets > 1) {
      columns_.target_names.clear();
      for (int t = 0; t < columns_.targets; ++t) columns_.target_names.push_back("y" + std::to_string(t));
    }
    return Status::Ok();
  }

  const Table& columns() const override { return columns_; }
  uint64_t rows() const override { return rows_; }

  Status Next(size_t max_rows, Table* chunk) override {
    const uint64_t n = std::min<uint64_t>(max_rows, rows_ - next_);
    const uint64_t f = static_cast<uint64_t>(columns_.features), t = static_cast<uint64_t>(columns_.targets);
    chunk->features = columns_.features;
    chunk->targets = columns_.targets;
    chunk->x.resize(static_cast<size_t>(n * f));
    chunk->y.resize(static_cast<size_t>(n * t));
    Status s = x_.ReadValues(next_ * f, n * f, chunk->x.data());
    if (s.ok())
      s = labels_ ? y_.ReadLabels(next_, n, labels_, chunk->y.data()) : y_.ReadValues(next_ * t, n * t, chunk->y.data());
    if (!s.ok()) return s;
    next_ += n;
    return Status::Ok();
  }

 private:
  NpyFile x_, y_;
  LabelMap* labels_ = nullptr;
  Table columns_;
  uint64_t rows_ = 0, next_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<RowReader>> OpenNpyPair(const std::string& x_path, const std::string& y_path,
                                                 LabelMap* labels) {
  auto r = std::make_unique<NpyPairReader>();
  Status s = r->Open(x_path, y_path, labels);
  if (!s.ok()) return s;
  return std::unique_ptr<RowReader>(std::move(r));
}

StatusOr<Table> LoadNpyPair(const std::string& x_path, const std::string& y_path, LabelMap* labels) {
  auto r = OpenNpyPair(x_path, y_path, labels);
  if (!r.ok()) return r.status();
  return ReadAllRows(**r);
}

StatusOr<std::vector<float>> LoadNpyColumn(const std::string& path, uint64_t rows) {
  NpyFile f;
  Status s = f.Open(path);
  if (!s.ok()) return s;
  const auto& shape = f.shape();
  const bool fits = (shape.size() == 1 && shape[0] == rows) || (shape.size() == 2 && shape[0] == rows && shape[1] == 1);
  if (!fits)
    return Status::InvalidArgument(path + ": shape " + ShapeText(shape) + ", expected (" + std::to_string(rows) +
                                   ",) or (" + std::to_string(rows) + ", 1)");
  std::vector<float> out(static_cast<size_t>(rows));
  if (rows > 0) s = f.ReadValues(0, rows, out.data());
  if (!s.ok()) return s;
  return out;
}

}  // namespace ens
