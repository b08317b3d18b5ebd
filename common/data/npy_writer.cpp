#include "common/data/npy_writer.h"

#include "common/base/env.h"
#include "common/base/fd_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

namespace ens {

static_assert(std::endian::native == std::endian::little, "the .npy writer writes native floats as '<f4'");

namespace {
constexpr size_t kChunkFloats = size_t{1} << 18;  // 1 MiB

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}
}  // namespace

std::string NpyHeader(const std::string& descr, const std::vector<uint64_t>& shape) {
  std::string dims;
  for (uint64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (n,) keeps its comma, (n, m) does not
  else if (!dims.empty()) dims.pop_back();
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

StatusOr<NpyWriter> NpyWriter::Create(const std::string& path, const std::vector<uint64_t>& shape) {
  if (shape.empty() || shape.size() > 2) return Status::InvalidArgument(path + ": an .npy of 1 or 2 dimensions");
  NpyWriter w;
  w.path_ = path;
  w.rows_ = shape[0];
  w.cols_ = shape.size() == 2 ? shape[1] : 1;
  w.fd_ = CurrentEnv().Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w.fd_ < 0) return Errno("create", path);
  const std::string header = NpyHeader("<f4", shape);
  Status s = WriteFull(w.fd_, header.data(), header.size(), path);
  if (!s.ok()) return s;
  w.buffer_.reserve(std::min<uint64_t>(kChunkFloats, std::max<uint64_t>(1, w.rows_ * w.cols_)));
  return w;
}

NpyWriter::NpyWriter(NpyWriter&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), rows_(o.rows_), cols_(o.cols_),
      written_(o.written_), buffer_(std::move(o.buffer_)) {}

NpyWriter& NpyWriter::operator=(NpyWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) CurrentEnv().Close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    rows_ = o.rows_;
    cols_ = o.cols_;
    written_ = o.written_;
    buffer_ = std::move(o.buffer_);
  }
  return *this;
}

NpyWriter::~NpyWriter() {
  if (fd_ >= 0) CurrentEnv().Close(fd_);
}

Status NpyWriter::Flush() {
  Status s = WriteFull(fd_, buffer_.data(), buffer_.size() * sizeof(float), path_);
  buffer_.clear();
  return s;
}

Status NpyWriter::AppendRow(const float* values) {
  if (fd_ < 0) return Status::Internal(path_ + ": already finished");
  if (written_ >= rows_) return Status::InvalidArgument(path_ + ": more than the declared " + std::to_string(rows_) + " rows");
  buffer_.insert(buffer_.end(), values, values + cols_);
  ++written_;
  return buffer_.size() + cols_ > kChunkFloats ? Flush() : Status::Ok();
}

Status NpyWriter::Finish(bool durable) {
  if (fd_ < 0) return Status::Internal(path_ + ": already finished");
  if (written_ != rows_)
    return Status::InvalidArgument(path_ + ": " + std::to_string(written_) + " rows written of " + std::to_string(rows_));
  Status s = Flush();
  if (s.ok() && durable && CurrentEnv().Fsync(fd_) != 0) s = Errno("fsync", path_);
  if (CurrentEnv().Close(std::exchange(fd_, -1)) != 0 && s.ok()) s = Errno("close", path_);
  return s;
}

Status WriteNpyFloat32(const std::string& path, const float* data, uint64_t rows, uint64_t cols, uint64_t stride,
                       bool durable) {
  auto w = NpyWriter::Create(path, cols == 0 ? std::vector<uint64_t>{rows} : std::vector<uint64_t>{rows, cols});
  if (!w.ok()) return w.status();
  for (uint64_t r = 0; r < rows; ++r) {
    Status s = w->AppendRow(data + r * stride);
    if (!s.ok()) return s;
  }
  return w->Finish(durable);
}

Status WriteNpyInt64(const std::string& path, const std::vector<int64_t>& values, bool durable) {
  std::string bytes = NpyHeader("<i8", {values.size()});
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  const int fd = CurrentEnv().Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", path);
  Status s = WriteFull(fd, bytes.data(), bytes.size(), path);
  if (s.ok() && durable && CurrentEnv().Fsync(fd) != 0) s = Errno("fsync", path);
  if (CurrentEnv().Close(fd) != 0 && s.ok()) s = Errno("close", path);
  return s;
}

}  // namespace ens
