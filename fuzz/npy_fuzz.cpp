// libFuzzer target: the .npy pair loader (common/data/data_source.h) on arbitrary file contents.
//
// The input is split in two halves: the first floor(size / 2) bytes are the X file, the
// rest the y file (the seed corpus holds pairs of equal length joined). Either a Table or
// a Status.
#include <cstddef>
#include <cstdint>

#include "common/data/data_source.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ens::fuzz::ScratchFile x_file(".x.npy");
  static ens::fuzz::ScratchFile y_file(".y.npy");
  const size_t half = size / 2;
  const std::string& x_path = x_file.Write(data, half);
  const std::string& y_path = y_file.Write(data + half, size - half);
  const ens::StatusOr<ens::Table> t = ens::LoadNpyPair(x_path, y_path);
  if (t.ok()) {
    const ens::Table& table = t.value();
    if (table.features < 1 || table.rows() < 1) __builtin_trap();
    if (table.x.size() != table.rows() * static_cast<size_t>(table.features)) __builtin_trap();
    if (table.targets < 1 || table.y.size() != table.rows() * static_cast<size_t>(table.targets)) __builtin_trap();
    if (table.target_names.size() != static_cast<size_t>(table.targets)) __builtin_trap();
  }
  return 0;
}
