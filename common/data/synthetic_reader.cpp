// The synthetic source's reader (data_source.h DataFilesReader): Friedman #1 rows generated
// from the run seed, train, holdout and pool each from a seed of its own (DataSeed's salts 1, 2,
// 3), so a run's data is reproducible from its config alone. A regression target only.
#include <algorithm>

#include "common/data/data_source.h"

namespace ens {
namespace {

constexpr uint64_t kTrainSalt = 1;
constexpr uint64_t kHoldoutSalt = 2;
constexpr uint64_t kPoolSalt = 3;

// The train rows, generated whole at the first Next (columns() and rows() need none).
class SyntheticRows : public RowReader {
 public:
  SyntheticRows(const DataSpec& spec, uint64_t seed)
      : rows_(spec.initial_rows),
        features_(spec.synthetic_features),
        noise_(spec.synthetic_noise),
        seed_(seed),
        columns_(GenerateFriedman1(0, spec.synthetic_features, spec.synthetic_noise, seed)) {}
  const Table& columns() const override { return columns_; }
  uint64_t rows() const override { return static_cast<uint64_t>(rows_); }
  Status Next(size_t max_rows, Table* chunk) override {
    if (!generated_) table_ = GenerateFriedman1(rows_, features_, noise_, seed_), generated_ = true;
    const size_t n = std::min(max_rows, table_.rows() - next_);
    *chunk = columns_;
    chunk->x.assign(table_.x.begin() + static_cast<std::ptrdiff_t>(next_ * features_),
                    table_.x.begin() + static_cast<std::ptrdiff_t>((next_ + n) * features_));
    chunk->y.assign(table_.y.begin() + static_cast<std::ptrdiff_t>(next_), table_.y.begin() + static_cast<std::ptrdiff_t>(next_ + n));
    next_ += n;
    return Status::Ok();
  }

 private:
  int rows_, features_;
  double noise_;
  uint64_t seed_;
  Table columns_, table_;
  bool generated_ = false;
  size_t next_ = 0;
};

}  // namespace

StatusOr<DataFiles> OpenSyntheticFiles(const DataSpec& spec, uint64_t run_seed, LabelMap* train_labels, LabelMap*) {
  if (train_labels != nullptr)
    return Status::InvalidArgument("data.source: the synthetic data is a regression target; classification needs csv or npy");
  if (spec.synthetic_features < 5) {
    return Status::InvalidArgument("data.synthetic_features must be >= 5");
  }
  if (spec.initial_rows < 1 || spec.holdout_rows < 1 || spec.pool_rows < 0) {
    return Status::InvalidArgument("data: initial_rows and holdout_rows must be >= 1, pool_rows >= 0");
  }
  DataFiles f;
  f.train = std::make_unique<SyntheticRows>(spec, DataSeed(run_seed, kTrainSalt));
  f.train_name = f.holdout_name = f.pool_name = "the synthetic data";
  const int features = spec.synthetic_features;
  const double noise = spec.synthetic_noise;
  auto generated = [features, noise, run_seed](int rows, uint64_t salt) {
    return [=]() -> StatusOr<Table> { return GenerateFriedman1(rows, features, noise, DataSeed(run_seed, salt)); };
  };
  f.load_holdout = generated(spec.holdout_rows, kHoldoutSalt);
  f.load_pool = generated(spec.pool_rows, kPoolSalt);
  return f;
}

}  // namespace ens
