// Dataset segment: one table of float32 rows in a file-backed shared mapping.
//
// Layout (all little-endian, one source of truth for ARCHITECTURE.md):
//   [0, 4096)            SegmentHeader, zero padded
//   [4096, ...)          capacity_rows rows of (features + targets) float32: features..., targets...
// `targets` is the header's count of target columns; 0 (segments written before several
// targets existed) reads as 1.
// Rows are only ever appended; generation g of the table is the prefix of rows_g rows
// recorded in the journal, so an append costs O(rows appended) and a reader of generation g
// never sees a byte change. `checksum` is FNV-1a 64 over the bytes of the first `rows` rows,
// continued incrementally on append.
//
// The supervisor is the only writer (DatasetWriter, pwrite + fsync). Workers map the file
// read-only (DatasetView, Boost.Interprocess mapped_region): every worker shares the page
// cache's one physical copy, and no lock lives in the segment, so a worker killed at any
// instant cannot wedge it. A reader refuses a segment whose header does not match.
// DatasetWriter and DatasetView are move-only and thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/base/status.h"
#include "common/base/table.h"

namespace ens {

inline constexpr char kSegmentMagic[8] = {'E', 'N', 'S', 'D', 'S', 'E', 'T', '1'};
inline constexpr uint32_t kSegmentLayoutVersion = 1;
inline constexpr uint32_t kDtypeFloat32 = 1;
inline constexpr uint64_t kSegmentHeaderBytes = 4096;

struct SegmentHeader {
  char magic[8];
  uint32_t layout_version;
  uint32_t dtype;
  uint64_t generation;
  uint64_t rows;
  uint64_t capacity_rows;
  uint32_t features;
  uint32_t targets;  // 0 = 1 (see above); TargetCount() reads it
  uint64_t checksum;
};
static_assert(sizeof(SegmentHeader) <= kSegmentHeaderBytes);

// The header's target count (>= 1) and row length in floats.
inline uint32_t TargetCount(const SegmentHeader& h) { return h.targets == 0 ? 1 : h.targets; }
inline uint64_t RowFloats(const SegmentHeader& h) { return uint64_t{h.features} + TargetCount(h); }

// FNV-1a 64 over bytes, continuing from `state` (start with kFnvOffset).
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
uint64_t Fnv1a64(const void* data, size_t bytes, uint64_t state);

// Checks a header against the file size it came from; names `path` in errors.
Status ValidateSegmentHeader(const SegmentHeader& h, uint64_t file_bytes, const std::string& path);

class DatasetWriter {
 public:
  // Creates (or replaces) the file at path holding `table` as generation `generation`.
  static StatusOr<std::unique_ptr<DatasetWriter>> Create(const std::string& path,
                                                         const Table& table,
                                                         uint64_t generation);
  // The same, with rows arriving in chunks (a table streamed from a file, never held whole):
  // Begin creates path.tmp with no rows, AddRows writes each chunk unflushed, Commit flushes
  // rows and header and renames path.tmp to path. Nothing appears at path before Commit.
  static StatusOr<std::unique_ptr<DatasetWriter>> Begin(const std::string& path, int features,
                                                        uint64_t generation, uint64_t capacity_rows,
                                                        int targets = 1);
  Status AddRows(const Table& rows);
  Status Commit();
  // Opens an existing segment for appending (resume).
  static StatusOr<std::unique_ptr<DatasetWriter>> Open(const std::string& path);
  ~DatasetWriter();

  // Appends rows (REQUIRES: same feature and target counts) and publishes them as `new_generation`.
  // Grows the file geometrically when capacity is exceeded. Durable on return.
  Status Append(const Table& rows, uint64_t new_generation);
  // Rolls back to the first `rows` rows as `generation` (resume after a crash that appended
  // rows the journal never committed). Recomputes the checksum over those rows.
  Status Rollback(uint64_t rows, uint64_t generation);
  // Reads rows [begin, end) back (for summaries and drops).
  StatusOr<Table> Read(uint64_t begin, uint64_t end) const;

  const SegmentHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

 private:
  DatasetWriter(std::string path, int fd, SegmentHeader h);
  Status WriteHeader();
  std::string path_, final_path_;
  int fd_ = -1;
  SegmentHeader header_{};
};

class DatasetView {
 public:
  // Maps path read-only and validates header and checksum. Errors name the path.
  // With `checked` (this process's earlier view of the same file, whose checksum it verified),
  // only the rows appended since are read: the checksum is continued from checked's, O(rows
  // added). Should that not match (the file was replaced, or rolled back and rewritten), the
  // whole table is checked as without it.
  static StatusOr<std::unique_ptr<DatasetView>> Map(const std::string& path, const DatasetView* checked = nullptr);
  // Rows the last Map actually read to check the checksum (tests, benchmarks).
  uint64_t rows_checked() const { return rows_checked_; }
  ~DatasetView();

  const SegmentHeader& header() const { return header_; }
  // Row r starts at data() + r * stride(); stride = features + targets (targets last).
  const float* data() const { return data_; }
  uint64_t stride() const { return RowFloats(header_); }
  int targets() const { return static_cast<int>(TargetCount(header_)); }

 private:
  DatasetView() = default;
  struct Region;
  std::unique_ptr<Region> region_;
  SegmentHeader header_{};
  const float* data_ = nullptr;
  uint64_t device_ = 0, inode_ = 0;  // the file mapped (a replaced file is checked in full)
  uint64_t rows_checked_ = 0;
};

}  // namespace ens
