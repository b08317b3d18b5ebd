// libFuzzer target: the CSV loader (common/data/data_source.h) on arbitrary file contents.
//
// The call shapes the daemon uses: training data (every column but the target "y", or but the
// targets "y" and "z") and prediction input (named features "a", "b", no target). Either a
// Table or a Status.
#include <cstddef>
#include <cstdint>

#include "common/data/data_source.h"
#include "fuzz/fuzz_file.h"

namespace {

// A loaded Table must be rectangular: rows() * features values, rows() * targets targets, one
// name per feature and per target.
void CheckTable(const ens::StatusOr<ens::Table>& t) {
  if (!t.ok()) return;
  const ens::Table& table = t.value();
  if (table.features < 1 || table.rows() < 1) __builtin_trap();
  if (table.x.size() != table.rows() * static_cast<size_t>(table.features)) __builtin_trap();
  if (table.feature_names.size() != static_cast<size_t>(table.features)) __builtin_trap();
  if (table.targets < 1 || table.y.size() != table.rows() * static_cast<size_t>(table.targets)) __builtin_trap();
  if (table.target_names.size() != static_cast<size_t>(table.targets)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ens::fuzz::ScratchFile file(".csv");
  const std::string& path = file.Write(data, size);
  CheckTable(ens::LoadCsv(path, {}, "y"));
  CheckTable(ens::LoadCsv(path, {}, std::vector<std::string>{"y", "z"}));
  CheckTable(ens::LoadCsv(path, {"a", "b"}, ""));
  return 0;
}
