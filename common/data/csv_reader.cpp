// The csv source's reader (data_source.h DataFilesReader): a file a table, a header line naming
// the columns (csv_loader.cpp reads them).
#include "common/data/data_source.h"

namespace ens {

StatusOr<DataFiles> OpenCsvFiles(const DataSpec& spec, uint64_t, LabelMap* train_labels, LabelMap* labels) {
  if (spec.train_path.empty()) return Status::InvalidArgument("data.train_path is required");
  DataFiles f;
  auto train = OpenCsv(spec.train_path, spec.feature_columns, spec.target_columns, train_labels);
  if (!train.ok()) return train.status();
  f.train = std::move(*train);
  f.train_name = spec.train_path;
  auto loader = [&spec, labels](const std::string& path) {
    return [&spec, path, labels] { return LoadCsv(path, spec.feature_columns, spec.target_columns, labels); };
  };
  if (!spec.pool_path.empty()) f.load_pool = loader(spec.pool_path), f.pool_name = spec.pool_path;
  if (!spec.holdout_path.empty()) f.load_holdout = loader(spec.holdout_path), f.holdout_name = spec.holdout_path;
  return f;
}

}  // namespace ens
