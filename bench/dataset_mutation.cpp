// Dataset mutation benchmark: DatasetWriter::Append of 1k rows to a 10M-row (10 features)
// segment, against the same append to a 1M-row segment (an O(rows changed) append takes about
// the same time on both).
//
// For each segment size: Create the segment, then 20 Appends of `append_rows` rows, each timed
// (steady_clock) and accounted with /proc/self/io (wchar: bytes handed to write/pwrite;
// write_bytes: bytes this process caused to be sent to storage). Also timed, for context:
//   - a bare 4 KiB pwrite + fdatasync on the same file system (Append does one fdatasync);
//   - DatasetView::Map of the appended segment with the worker's view of the generation before
//     (what each running worker does to take up a new generation: it checks only the appended
//     rows, continuing the checksum), after every append;
//   - DatasetView::Map of the appended segment alone (what a restarted worker does once: it
//     checks the checksum over every row).
// Prints a table and, last, one JSON line with every figure.
//
// Usage: dataset_mutation DIR [append_rows=1000] [reps=20] [big_rows=10000000] [small_rows=1000000]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/state/dataset_segment.h"
#include "common/base/table.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

struct Io {
  long long wchar = 0, write_bytes = 0;
};
Io ReadIo() {
  Io io;
  std::ifstream in("/proc/self/io");
  std::string k;
  long long v;
  while (in >> k >> v) {
    if (k == "wchar:") io.wchar = v;
    if (k == "write_bytes:") io.write_bytes = v;
  }
  return io;
}

ens::Table MakeTable(size_t rows, int features, float base) {
  ens::Table t;
  t.features = features;
  for (int c = 0; c < features; ++c) t.feature_names.push_back("x" + std::to_string(c));
  t.x.resize(rows * features);
  t.y.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    for (int c = 0; c < features; ++c) t.x[r * features + c] = base + static_cast<float>((r * 31 + c * 7) % 1000) * 1e-3f;
    t.y[r] = static_cast<float>(r % 977);
  }
  return t;
}

struct Stats {
  double median, p90, min, max, mean;
};
Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)], v.front(), v.back(), sum / v.size()};
}

struct Result {
  size_t rows = 0;
  double create_ms = 0;
  Stats append_ms{};
  double wchar_per_append = 0, write_bytes_per_append = 0;
  double payload_bytes = 0;
  uint64_t file_bytes = 0, capacity_rows = 0;
  Stats map_ms{};       // a fresh view: every row checked
  Stats map_next_ms{};  // the next generation after the previous view: appended rows checked
};

Result Run(const std::string& dir, size_t rows, size_t add, int reps) {
  Result r;
  r.rows = rows;
  std::string path = dir + "/seg-" + std::to_string(rows) + ".bin";
  ens::Table t = MakeTable(rows, 10, 0.f);
  auto t0 = Clock::now();
  auto w = ens::DatasetWriter::Create(path, t, 0);
  auto t1 = Clock::now();
  if (!w.ok()) {
    std::fprintf(stderr, "create: %s\n", w.status().ToString().c_str());
    std::exit(1);
  }
  t = ens::Table();  // free the big table
  r.create_ms = Ms(t0, t1);
  ens::Table delta = MakeTable(add, 10, 5.f);
  std::vector<double> ms, next;
  long long wchar = 0, wbytes = 0;
  auto prev = ens::DatasetView::Map(path);  // the worker's view of generation 0
  if (!prev.ok()) {
    std::fprintf(stderr, "map: %s\n", prev.status().ToString().c_str());
    std::exit(1);
  }
  for (int i = 0; i < reps; ++i) {
    Io a = ReadIo();
    auto s0 = Clock::now();
    ens::Status s = (*w)->Append(delta, static_cast<uint64_t>(i + 1));
    auto s1 = Clock::now();
    Io b = ReadIo();
    if (!s.ok()) {
      std::fprintf(stderr, "append: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    ms.push_back(Ms(s0, s1));
    wchar += b.wchar - a.wchar;
    wbytes += b.write_bytes - a.write_bytes;
    auto n0 = Clock::now();
    auto v = ens::DatasetView::Map(path, prev->get());
    auto n1 = Clock::now();
    if (!v.ok() || (*v)->rows_checked() != add) {
      std::fprintf(stderr, "map next: %s\n", v.ok() ? "checked more than the appended rows" : v.status().ToString().c_str());
      std::exit(1);
    }
    next.push_back(Ms(n0, n1));
    prev = std::move(v);
  }
  r.map_next_ms = Summarise(next);
  r.append_ms = Summarise(ms);
  r.wchar_per_append = static_cast<double>(wchar) / reps;
  r.write_bytes_per_append = static_cast<double>(wbytes) / reps;
  r.payload_bytes = static_cast<double>(add * 11 * sizeof(float));
  r.capacity_rows = (*w)->header().capacity_rows;
  r.file_bytes = static_cast<uint64_t>(::lseek(::open(path.c_str(), O_RDONLY | O_CLOEXEC), 0, SEEK_END));
  std::vector<double> maps;
  for (int i = 0; i < 3; ++i) {
    auto m0 = Clock::now();
    auto v = ens::DatasetView::Map(path);
    auto m1 = Clock::now();
    if (!v.ok()) {
      std::fprintf(stderr, "map: %s\n", v.status().ToString().c_str());
      std::exit(1);
    }
    maps.push_back(Ms(m0, m1));
  }
  r.map_ms = Summarise(maps);
  w->reset();
  ::unlink(path.c_str());
  return r;
}

double BareSyncMs(const std::string& dir, int reps) {
  std::string path = dir + "/sync-probe.bin";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::vector<char> page(4096, 'x');
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    if (::pwrite(fd, page.data(), page.size(), 0) != 4096 || ::fdatasync(fd) != 0) std::exit(1);
    ms.push_back(Ms(a, Clock::now()));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return Summarise(ms).median;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [append_rows] [reps] [big_rows] [small_rows]\n", argv[0]);
    return 64;
  }
  std::string dir = argv[1];
  size_t add = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;
  int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  size_t big = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 10000000;
  size_t small = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1000000;

  double sync_ms = BareSyncMs(dir, reps);
  Result rs = Run(dir, small, add, reps);
  Result rb = Run(dir, big, add, reps);

  std::printf("\ndataset mutation: Append of %zu rows x 10 features (+ target), %d repetitions each\n", add, reps);
  std::printf("%-12s %10s %10s %10s %10s %10s %14s %14s %12s %14s %14s\n", "segment rows", "median ms", "p90 ms",
              "min ms", "max ms", "create ms", "wchar B/app", "disk B/app", "payload B", "Map() ms", "Map(next) ms");
  for (const Result* r : {&rs, &rb})
    std::printf("%-12zu %10.3f %10.3f %10.3f %10.3f %10.1f %14.0f %14.0f %12.0f %14.1f %14.3f\n", r->rows,
                r->append_ms.median, r->append_ms.p90, r->append_ms.min, r->append_ms.max, r->create_ms,
                r->wchar_per_append, r->write_bytes_per_append, r->payload_bytes, r->map_ms.median,
                r->map_next_ms.median);
  std::printf("\nratio median append 10M : 1M = %.2f   (bytes written 10M : 1M = %.2f)\n",
              rb.append_ms.median / rs.append_ms.median, rb.wchar_per_append / rs.wchar_per_append);
  std::printf("bare 4 KiB pwrite + fdatasync on this file system: median %.3f ms (Append does 1 fdatasync)\n",
              sync_ms);
  std::printf("goal: 10M-row append <= 10 ms: %s (median %.3f ms)\n", rb.append_ms.median <= 10 ? "MET" : "NOT MET",
              rb.append_ms.median);
  std::printf("Map(next) = a running worker taking up the next generation (checks the %zu appended rows): "
              "median %.3f ms at %zu rows, %.3f ms at %zu rows; goal <= 10 ms: %s\n", add, rs.map_next_ms.median, rs.rows,
              rb.map_next_ms.median, rb.rows, rb.map_next_ms.median <= 10 ? "MET" : "NOT MET");
  std::printf("Map() = a restarted worker (checks the checksum over all rows, once): "
              "%.1f ms at %zu rows, %.1f ms at %zu rows\n", rs.map_ms.median, rs.rows, rb.map_ms.median, rb.rows);

  auto js = [](const Result& r) {
    char b[1024];
    std::snprintf(b, sizeof(b),
                  "{\"rows\": %zu, \"create_ms\": %.3f, \"append_ms\": {\"median\": %.4f, \"p90\": %.4f, \"min\": %.4f, "
                  "\"max\": %.4f, \"mean\": %.4f}, \"wchar_per_append\": %.0f, \"write_bytes_per_append\": %.0f, "
                  "\"payload_bytes\": %.0f, \"capacity_rows\": %llu, \"file_bytes\": %llu, \"map_ms_median\": %.3f, "
                  "\"map_next_ms_median\": %.4f}",
                  r.rows, r.create_ms, r.append_ms.median, r.append_ms.p90, r.append_ms.min, r.append_ms.max,
                  r.append_ms.mean, r.wchar_per_append, r.write_bytes_per_append, r.payload_bytes,
                  static_cast<unsigned long long>(r.capacity_rows), static_cast<unsigned long long>(r.file_bytes),
                  r.map_ms.median, r.map_next_ms.median);
    return std::string(b);
  };
  std::printf("JSON {\"append_rows\": %zu, \"reps\": %d, \"bare_fdatasync_ms\": %.4f, \"small\": %s, \"big\": %s, "
              "\"ratio_median_big_small\": %.4f}\n",
              add, reps, sync_ms, js(rs).c_str(), js(rb).c_str(), rb.append_ms.median / rs.append_ms.median);
  return 0;
}
