#include "common/state/dataset_segment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/base/env.h"
#include "common/base/fd_io.h"

namespace ens {
namespace bip = boost::interprocess;

uint64_t Fnv1a64(const void* data, size_t bytes, uint64_t state) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    state ^= p[i];
    state *= 0x100000001b3ULL;
  }
  return state;
}

Status ValidateSegmentHeader(const SegmentHeader& h, uint64_t file_bytes, const std::string& path) {
  if (std::memcmp(h.magic, kSegmentMagic, sizeof(kSegmentMagic)) != 0)
    return Status::Corruption(path + ": not a dataset segment (bad magic)");
  if (h.layout_version != kSegmentLayoutVersion)
    return Status::Corruption(path + ": layout version " + std::to_string(h.layout_version) +
                              ", this build reads " + std::to_string(kSegmentLayoutVersion));
  if (h.dtype != kDtypeFloat32) return Status::Corruption(path + ": unsupported dtype");
  if (h.features == 0 || h.features > (1u << 20))
    return Status::Corruption(path + ": implausible feature count " + std::to_string(h.features));
  if (h.targets > static_cast<uint32_t>(kMaxTargets))
    return Status::Corruption(path + ": implausible target count " + std::to_string(h.targets));
  if (h.rows > h.capacity_rows) return Status::Corruption(path + ": rows exceed capacity");
  uint64_t stride = RowFloats(h) * sizeof(float);
  if (h.capacity_rows > (UINT64_MAX - kSegmentHeaderBytes) / stride ||
      kSegmentHeaderBytes + h.capacity_rows * stride > file_bytes)
    return Status::Corruption(path + ": file is shorter than its header says");
  return Status::Ok();
}

namespace {

std::vector<float> Interleave(const Table& t) {
  std::vector<float> out;
  const size_t f = static_cast<size_t>(t.features), k = static_cast<size_t>(t.targets);
  out.reserve(t.rows() * (f + k));
  for (size_t r = 0; r < t.rows(); ++r) {
    out.insert(out.end(), t.x.begin() + r * f, t.x.begin() + (r + 1) * f);
    out.insert(out.end(), t.y.begin() + r * k, t.y.begin() + (r + 1) * k);
  }
  return out;
}

uint64_t RowBytes(const SegmentHeader& h) { return RowFloats(h) * sizeof(float); }

}  // namespace

DatasetWriter::DatasetWriter(std::string path, int fd, SegmentHeader h)
    : path_(std::move(path)), fd_(fd), header_(h) {}

DatasetWriter::~DatasetWriter() {
  if (fd_ >= 0) CurrentEnv().Close(fd_);
}

StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(const std::string& path,
                                                               const Table& table,
                                                               uint64_t generation) {
  auto w = Begin(path, table.features, generation, table.rows() * 2, table.targets);
  if (!w.ok()) return w.status();
  Status s = (*w)->AddRows(table);
  if (s.ok()) s = (*w)->Commit();
  if (!s.ok()) return s;
  return std::move(*w);
}

StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Begin(const std::string& path, int features,
                                                              uint64_t generation, uint64_t capacity_rows,
                                                              int targets) {
  if (features <= 0) return Status::InvalidArgument(path + ": table has no features");
  if (targets <= 0) return Status::InvalidArgument(path + ": table has no targets");
  std::string tmp = path + ".tmp";
  int fd = CurrentEnv().Open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("create " + tmp, errno);
  SegmentHeader h{};
  std::memcpy(h.magic, kSegmentMagic, sizeof(h.magic));
  h.layout_version = kSegmentLayoutVersion;
  h.dtype = kDtypeFloat32;
  h.features = static_cast<uint32_t>(features);
  h.targets = static_cast<uint32_t>(targets);
  h.capacity_rows = std::max<uint64_t>(1024, capacity_rows);
  h.generation = generation;
  h.rows = 0;
  h.checksum = kFnvOffset;
  std::unique_ptr<DatasetWriter> w(new DatasetWriter(tmp, fd, h));
  w->final_path_ = path;
  if (CurrentEnv().Ftruncate(fd, kSegmentHeaderBytes + h.capacity_rows * RowBytes(h)) != 0)
    return Status::FromErrno("resize " + tmp, errno);
  return w;
}

Status DatasetWriter::Commit() {
  Status s = WriteHeader();
  if (!s.ok()) return s;
  if (CurrentEnv().Rename(path_, final_path_) != 0) return Status::FromErrno("rename " + path_, errno);
  path_ = final_path_;
  return Status::Ok();
}

StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Open(const std::string& path) {
  int fd = CurrentEnv().Open(path, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  SegmentHeader h{};
  struct stat st {};
  Status s = PreadFull(fd, &h, sizeof(h), 0, path);
  if (s.ok() && ::fstat(fd, &st) != 0) s = Status::FromErrno("stat " + path, errno);
  if (s.ok()) s = ValidateSegmentHeader(h, static_cast<uint64_t>(st.st_size), path);
  if (!s.ok()) {
    CurrentEnv().Close(fd);
    return s;
  }
  return std::unique_ptr<DatasetWriter>(new DatasetWriter(path, fd, h));
}

Status DatasetWriter::WriteHeader() {
  char page[kSegmentHeaderBytes] = {};
  std::memcpy(page, &header_, sizeof(header_));
  Status s = PwriteFull(fd_, page, sizeof(page), 0, path_);
  if (!s.ok()) return s;
  if (CurrentEnv().Fdatasync(fd_) != 0) return Status::FromErrno("fsync " + path_, errno);
  return Status::Ok();
}

Status DatasetWriter::AddRows(const Table& rows) {
  if (rows.features != static_cast<int>(header_.features))
    return Status::InvalidArgument(path_ + ": appending rows with " + std::to_string(rows.features) +
                                   " features to a segment of " +
                                   std::to_string(header_.features));
  if (rows.targets != static_cast<int>(TargetCount(header_)))
    return Status::InvalidArgument(path_ + ": appending rows with " + std::to_string(rows.targets) +
                                   " targets to a segment of " + std::to_string(TargetCount(header_)));
  uint64_t need = header_.rows + rows.rows();
  if (need > header_.capacity_rows) {
    uint64_t cap = std::max(need, header_.capacity_rows * 2);
    if (CurrentEnv().Ftruncate(fd_, kSegmentHeaderBytes + cap * RowBytes(header_)) != 0)
      return Status::FromErrno("grow " + path_, errno);
    header_.capacity_rows = cap;
  }
  std::vector<float> buf = Interleave(rows);
  size_t bytes = buf.size() * sizeof(float);
  Status s = PwriteFull(fd_, buf.data(), bytes,
                       kSegmentHeaderBytes + header_.rows * RowBytes(header_), path_);
  if (!s.ok()) return s;
  header_.checksum = Fnv1a64(buf.data(), bytes, header_.checksum);
  header_.rows = need;
  return Status::Ok();
}

Status DatasetWriter::Append(const Table& rows, uint64_t new_generation) {
  // Rows and header, then one fdatasync for both. The order in which they reach the disk does
  // not matter: the journal's round_committed record, fsynced after this returns, is what
  // publishes a generation; a crash before it rolls the segment back to the journal's rows,
  // and a reader checks the checksum over header.rows.
  Status s = AddRows(rows);
  if (!s.ok()) return s;
  header_.generation = new_generation;
  return WriteHeader();
}

Status DatasetWriter::Rollback(uint64_t rows, uint64_t generation) {
  if (rows > header_.rows)
    return Status::Corruption(path_ + ": journal expects " + std::to_string(rows) +
                              " rows but the segment has only " + std::to_string(header_.rows));
  uint64_t checksum = kFnvOffset;
  std::vector<char> chunk(1 << 20);
  uint64_t total = rows * RowBytes(header_);
  for (uint64_t off = 0; off < total; off += chunk.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), total - off));
    Status s = PreadFull(fd_, chunk.data(), n, kSegmentHeaderBytes + off, path_);
    if (!s.ok()) return s;
    checksum = Fnv1a64(chunk.data(), n, checksum);
  }
  header_.rows = rows;
  header_.generation = generation;
  header_.checksum = checksum;
  return WriteHeader();
}

StatusOr<Table> DatasetWriter::Read(uint64_t begin, uint64_t end) const {
  if (begin > end || end > header_.rows) return Status::InvalidArgument(path_ + ": bad row range");
  const uint64_t stride = RowFloats(header_);
  std::vector<float> buf((end - begin) * stride);
  Status s = PreadFull(fd_, buf.data(), buf.size() * sizeof(float),
                      kSegmentHeaderBytes + begin * RowBytes(header_), path_);
  if (!s.ok()) return s;
  Table t;
  t.features = static_cast<int>(header_.features);
  t.targets = static_cast<int>(TargetCount(header_));
  for (uint64_t r = 0; r < end - begin; ++r) t.AppendRow(&buf[r * stride], &buf[r * stride + t.features]);
  return t;
}

struct DatasetView::Region {
  bip::file_mapping file;
  bip::mapped_region region;
};

DatasetView::~DatasetView() = default;

StatusOr<std::unique_ptr<DatasetView>> DatasetView::Map(const std::string& path, const DatasetView* checked) {
  std::unique_ptr<DatasetView> v(new DatasetView());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("map " + path, errno);
  v->device_ = static_cast<uint64_t>(st.st_dev);
  v->inode_ = static_cast<uint64_t>(st.st_ino);
  try {
    auto region = std::make_unique<Region>();
    region->file = bip::file_mapping(path.c_str(), bip::read_only);
    region->region = bip::mapped_region(region->file, bip::read_only);
    v->region_ = std::move(region);
  } catch (const bip::interprocess_exception& e) {
    return Status::IOError("map " + path + ": " + e.what());
  }
  uint64_t size = v->region_->region.get_size();
  if (size < kSegmentHeaderBytes) return Status::Corruption(path + ": shorter than a header");
  std::memcpy(&v->header_, v->region_->region.get_address(), sizeof(SegmentHeader));
  Status s = ValidateSegmentHeader(v->header_, size, path);
  if (!s.ok()) return s;
  v->data_ = reinterpret_cast<const float*>(
      static_cast<const char*>(v->region_->region.get_address()) + kSegmentHeaderBytes);
  const uint64_t row_bytes = RowBytes(v->header_);
  if (checked != nullptr && checked->device_ == v->device_ && checked->inode_ == v->inode_ &&
      checked->header_.features == v->header_.features && checked->header_.rows <= v->header_.rows) {
    const uint64_t from = checked->header_.rows;
    const char* base = reinterpret_cast<const char*>(v->data_);
    v->rows_checked_ = v->header_.rows - from;
    if (Fnv1a64(base + from * row_bytes, v->rows_checked_ * row_bytes, checked->header_.checksum) == v->header_.checksum)
      return v;
  }
  v->rows_checked_ = v->header_.rows;
  uint64_t sum = Fnv1a64(v->data_, v->header_.rows * row_bytes, kFnvOffset);
  if (sum != v->header_.checksum) return Status::Corruption(path + ": checksum mismatch");
  return v;
}

}  // namespace ens
