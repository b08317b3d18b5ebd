// libFuzzer target: the label readers of classification (common/config/class_list.h with the CSV and
// .npy loaders) on arbitrary file contents.
//
// The whole input as a CSV whose target "y" holds labels, and its halves as an .npy pair whose
// y holds integer labels (as npy_fuzz splits them). Each file is read as a run starts: once
// collecting labels, then, when they make a class list, again through it. The second read
// must succeed (the labels are the list's) with every target a class index; a class list
// must have 2..kMaxClasses classes that round-trip through JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/config/class_list.h"
#include "common/data/data_source.h"
#include "fuzz/fuzz_file.h"

namespace {

template <class Load>
void CheckLabels(Load load) {
  ens::LabelCollector collected;
  if (!load(&collected).ok()) return;
  std::vector<std::string> labels;
  for (const auto& [label, n] : collected.counts()) labels.push_back(label);
  auto classes = ens::ClassList::FromLabels(labels, "fuzz");
  if (!classes.ok()) return;
  const ens::ClassList& list = classes.value();
  if (list.size() < 2 || static_cast<size_t>(list.size()) > ens::kMaxClasses) __builtin_trap();
  auto back = ens::ClassList::FromJson(list.ToJson(), "fuzz");
  if (!back.ok() || back.value().names() != list.names()) __builtin_trap();
  ens::ClassList mapping = list;
  const ens::StatusOr<ens::Table> t = load(&mapping);
  if (!t.ok()) __builtin_trap();  // the same file, labels from its own list
  for (float y : t.value().y)
    if (!(y >= 0.0f && y < static_cast<float>(list.size())) || y != static_cast<float>(static_cast<int>(y)))
      __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ens::fuzz::ScratchFile csv(".csv");
  static ens::fuzz::ScratchFile x_file(".x.npy");
  static ens::fuzz::ScratchFile y_file(".y.npy");
  const std::string& path = csv.Write(data, size);
  CheckLabels([&](ens::LabelMap* labels) { return ens::LoadCsv(path, {}, "y", labels); });
  const size_t half = size / 2;
  const std::string& x_path = x_file.Write(data, half);
  const std::string& y_path = y_file.Write(data + half, size - half);
  CheckLabels([&](ens::LabelMap* labels) { return ens::LoadNpyPair(x_path, y_path, labels); });
  return 0;
}
