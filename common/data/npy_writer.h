// NpyWriter: writes float32 .npy files (and WriteNpyInt64 int64 ones) (format 1.0, little-endian '<f4', C order), the form
// numpy.load reads without options and data_source.h's loader reads back.
//
// Rows are written as they are produced, in chunks of about 1 MiB, so a file of any size
// costs O(chunk) memory. Finish() writes what is left and checks that exactly the declared
// number of rows came; a file that was not finished is incomplete (the caller removes it or
// never publishes it). Errors name the path. Move-only; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace ens {

class NpyWriter {
 public:
  // shape: {rows} or {rows, cols}. Creates (truncates) path.
  static StatusOr<NpyWriter> Create(const std::string& path, const std::vector<uint64_t>& shape);
  NpyWriter() = default;  // writes nothing; Create makes a usable one
  NpyWriter(NpyWriter&&) noexcept;
  NpyWriter& operator=(NpyWriter&&) noexcept;
  ~NpyWriter();

  // Appends one row of cols() values (1 for a 1-D file).
  Status AppendRow(const float* values);
  // Flushes and closes; fails unless rows() rows were appended. durable: fsync too.
  Status Finish(bool durable = false);
  uint64_t cols() const { return cols_; }

 private:
  Status Flush();
  std::string path_;
  int fd_ = -1;
  uint64_t rows_ = 0, cols_ = 1, written_ = 0;
  std::vector<float> buffer_;
};

// The header bytes of a C-order array of `descr` ('<f4', '<i8') and `shape` (magic, version
// 1.0, dict, padding to a multiple of 64 bytes), as numpy writes it.
std::string NpyHeader(const std::string& descr, const std::vector<uint64_t>& shape);

// A 1-D int64 array (row ids), written whole.
Status WriteNpyInt64(const std::string& path, const std::vector<int64_t>& values, bool durable = false);

// A whole array in one call: rows x cols values at `data`, row r starting at data + r * stride;
// cols 0 writes a 1-D array of `rows` values (one per row).
Status WriteNpyFloat32(const std::string& path, const float* data, uint64_t rows, uint64_t cols,
                       uint64_t stride, bool durable = false);

}  // namespace ens
