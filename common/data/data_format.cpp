// The data sources' readers, one a source (data_source.h DataFilesReader), and the one place
// that picks a source's reader: a table in DataSource's order, checked against its names. A new
// source adds its row here, its reader file common/data/<name>_reader.cpp (CMake picks it up by
// its name) and its name and DataSourceTraits row in common/config/run_options.h.
#include <array>

#include "common/base/seed.h"
#include "common/data/data_source.h"

namespace ens {

StatusOr<DataFiles> OpenSyntheticFiles(const DataSpec&, uint64_t, LabelMap*, LabelMap*);  // synthetic_reader.cpp
StatusOr<DataFiles> OpenCsvFiles(const DataSpec&, uint64_t, LabelMap*, LabelMap*);        // csv_reader.cpp
StatusOr<DataFiles> OpenNpyFiles(const DataSpec&, uint64_t, LabelMap*, LabelMap*);        // npy_reader.cpp

namespace {

constexpr std::array<DataFilesReader, 3> kDataFilesReaders{
    OpenSyntheticFiles,  // synthetic
    OpenCsvFiles,        // csv
    OpenNpyFiles,        // npy
};
static_assert(kDataFilesReaders.size() == kDataSourceNames.size(), "a reader per data source");

}  // namespace

StatusOr<DataFiles> OpenDataFiles(const DataSpec& spec, uint64_t run_seed, LabelMap* train_labels, LabelMap* labels) {
  return kDataFilesReaders[static_cast<size_t>(spec.source)](spec, run_seed, train_labels, labels);
}

uint64_t DataSeed(uint64_t run_seed, uint64_t salt) {
  const uint64_t base = StreamSeed(SplitMix64(run_seed), SeedStream::kData);
  return SplitMix64(base ^ salt);
}

}  // namespace ens
