// The npy source's reader (data_source.h DataFilesReader): a pair of .npy files a table, X and
// y (npy_loader.cpp reads them).
#include "common/data/data_source.h"

namespace ens {
namespace {

// An npy pair named explicitly or by a "<prefix>.x.npy"/"<prefix>.y.npy" prefix.
struct NpyPaths {
  std::string x, y;
  bool empty() const { return x.empty(); }
  std::string name() const { return x + " / " + y; }
};

StatusOr<NpyPaths> ResolveNpyPaths(const std::string& x, const std::string& y, const std::string& prefix,
                                   const std::string& what) {
  if (x.empty() != y.empty()) {
    return Status::InvalidArgument("data: " + what + " needs both x and y paths");
  }
  if (!x.empty()) return NpyPaths{x, y};
  if (!prefix.empty()) return NpyPaths{prefix + ".x.npy", prefix + ".y.npy"};
  return NpyPaths{};
}

}  // namespace

StatusOr<DataFiles> OpenNpyFiles(const DataSpec& spec, uint64_t, LabelMap* train_labels, LabelMap* labels) {
  StatusOr<NpyPaths> train_paths = ResolveNpyPaths(spec.x_path, spec.y_path, spec.train_path, "train (x_path/y_path)");
  if (!train_paths.ok()) return train_paths.status();
  if (train_paths->empty()) {
    return Status::InvalidArgument("data.x_path and data.y_path are required");
  }
  StatusOr<NpyPaths> pool_paths =
      ResolveNpyPaths(spec.pool_x_path, spec.pool_y_path, spec.pool_path, "pool (pool_x_path/pool_y_path)");
  if (!pool_paths.ok()) return pool_paths.status();
  DataFiles f;
  auto train = OpenNpyPair(train_paths->x, train_paths->y, train_labels);
  if (!train.ok()) return train.status();
  f.train = std::move(*train);
  f.train_name = train_paths->name();
  auto loader = [labels](const NpyPaths& p) { return [p, labels] { return LoadNpyPair(p.x, p.y, labels); }; };
  if (!pool_paths->empty()) f.load_pool = loader(*pool_paths), f.pool_name = pool_paths->name();
  if (!spec.holdout_path.empty()) {
    const NpyPaths holdout{spec.holdout_path + ".x.npy", spec.holdout_path + ".y.npy"};
    f.load_holdout = loader(holdout);
    f.holdout_name = holdout.name();
  }
  return f;
}

}  // namespace ens
