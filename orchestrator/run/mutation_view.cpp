#include "orchestrator/run/mutation_view.h"

#include "common/base/atomic_file.h"
#include "common/state/dataset_segment.h"
#include "common/state/member_view.h"
#include "common/data/npy_writer.h"
#include "common/state/run_layout.h"

namespace ens {

namespace {

// The generation's kept training rows (every table row but the dropped ones), ascending.
std::vector<int64_t> KeptRows(const MutationViewInputs& in) {
  std::vector<int64_t> rows;
  rows.reserve(in.table_rows - std::min<uint64_t>(in.table_rows, in.dropped->size()));
  auto next_dropped = in.dropped->begin();
  for (uint64_t r = 0; r < in.table_rows; ++r) {
    if (next_dropped != in.dropped->end() && *next_dropped == r) {
      ++next_dropped;
      continue;
    }
    rows.push_back(static_cast<int64_t>(r));
  }
  return rows;
}

// The members' entries of run.json: name, directory and where each prediction file's values are.
StatusOr<nlohmann::json> MemberEntries(const MutationViewInputs& in) {
  nlohmann::json members = nlohmann::json::array();
  for (size_t i = 0; i < in.member_names.size(); ++i) {
    nlohmann::json m = {{"name", in.member_names[i]}, {"dir", in.member_dirs[i]}};
    // Each prediction file as (file, offset in bytes, count of values): the member's own file
    // (offset 0), or its span of its pack's (pack_results.h); "holdout_pred" / "pool_pred" name
    // the member's own file only, so a script reading a whole file never reads a pack's.
    const MemberFiles files(in.member_dirs[i]);
    for (auto [key, path] : {std::pair{"holdout_pred", files.HoldoutPred()}, std::pair{"pool_pred", files.PoolPred()}}) {
      auto where = LocateMemberFile(path);
      if (!where.ok()) return where.status();
      if (where->whole) m[key] = where->file;
      m[std::string(key) + "_file"] = where->file;
      m[std::string(key) + "_offset"] = where->offset;
      m[std::string(key) + "_count"] = where->length / sizeof(float);
    }
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace

StatusOr<MutationView> WriteMutationView(const MutationViewInputs& in) {
  Status s = MakeDirs(RunLayout::MutationDir(in.round_dir));
  if (!s.ok()) return s;
  const std::vector<int64_t> rows = KeptRows(in);
  std::vector<int64_t> unused;
  for (size_t i = 0; i < in.pool_used->size(); ++i)
    if (!(*in.pool_used)[i]) unused.push_back(static_cast<int64_t>(i));
  const std::string row_ids = RunLayout::MutationTrainRowIds(in.round_dir);
  const std::string pool_ids = RunLayout::MutationPoolUnusedIds(in.round_dir);
  s = WriteNpyInt64(row_ids, rows);
  if (s.ok()) s = WriteNpyInt64(pool_ids, unused);
  if (!s.ok()) return s;
  auto members = MemberEntries(in);
  if (!members.ok()) return members.status();

  MutationView v;
  const std::string table = RunLayout::TrainSegment(in.data_dir);
  v.run = {{"state_dir", in.state_dir},
           {"round_dir", in.round_dir},
           {"round", in.round},
           {"generation", in.generation},
           {"features", in.features},
           {"targets", in.targets},
           {"feature_names", in.feature_names},
           {"train_table",
            {{"path", table},
             {"header_bytes", kSegmentHeaderBytes},
             {"rows", in.table_rows},
             {"columns", in.features + in.targets},
             {"dtype", "<f4"},
             {"layout", "rows of features then targets, row-major, after the header"}}},
           {"train_row_ids", row_ids},
           {"train_rows", rows.size()},
           {"dropped_rows", in.table_rows - rows.size()},
           {"holdout_x", RunLayout::HoldoutFeatures(in.data_dir)},
           {"pool_x", RunLayout::PoolFeatures(in.data_dir)},
           {"pool_unused_ids", pool_ids},
           {"members", std::move(*members)},
           {"predictions_dtype", "<f4"},
           {"ensemblectl", in.ctl_binary}};
  if (in.gaussian) v.run["prediction"] = "gaussian";
  if (!in.classes.empty()) {
    v.run["task"] = "classification";
    v.run["classes"] = in.classes;
    v.run["train_table"]["layout"] = "rows of features then the class index, row-major, after the header";
  }
  v.env = {{"ENSEMBLED_STATE_DIR", in.state_dir},
           {"ENSEMBLED_ROUND_DIR", in.round_dir},
           {"ENSEMBLED_ROUND", std::to_string(in.round)},
           {"ENSEMBLED_GENERATION", std::to_string(in.generation)},
           {"ENSEMBLED_FEATURES", std::to_string(in.features)},
           {"ENSEMBLED_TRAIN_TABLE", table},
           {"ENSEMBLED_TRAIN_ROW_IDS", row_ids},
           {"ENSEMBLED_HOLDOUT_X", RunLayout::HoldoutFeatures(in.data_dir)},
           {"ENSEMBLED_POOL_X", RunLayout::PoolFeatures(in.data_dir)},
           {"ENSEMBLED_POOL_UNUSED_IDS", pool_ids},
           {"ENSEMBLED_CTL", in.ctl_binary}};
  return v;
}

}  // namespace ens
