// RunOptions: the closed sets of choices a run config makes outside its members (where its
// workers run, where its data comes from, how its dataset changes between rounds, how a
// committee's disagreement is scored), as enums, with the same Name/Parse as member_options.h.
//
// The config reader (common/config/config.cpp) turns each string into its enum once; an unknown
// string is a config error at its JSON pointer. Nothing past it compares these as strings.
// The names below are the only spelling of each value in configs, run.json and summaries.
// Pure. Thread-safe.
#pragma once

#include "common/config/member_options.h"

namespace ens {

// resources.executor: workers forked here (local) or started as Slurm pilot jobs.
enum class ExecutorKind { kLocal, kSlurm };
// data.source: the built-in synthetic data, or files of a format. Each is read by its reader
// (common/data/data_format.cpp) and takes the "data" keys of its DataSourceTraits row below.
enum class DataSource { kSynthetic, kCsv, kNpy };
// mutation.policy (orchestrator/run/mutation_policy.h).
enum class MutationPolicyKind { kNone, kAppendFromPool, kQueryByCommittee, kCommand };
// mutation.score (common/scoring/committee_score.h).
enum class CommitteeScore { kStd, kEntropy, kBald, kEpistemic };
// mutation.batch: query by committee's k rows, the top k by score or a diverse batch
// (orchestrator/run/diverse_batch.h).
enum class BatchMode { kTop, kDiverse };

inline constexpr std::array<std::string_view, 2> kExecutorNames{"local", "slurm"};
inline constexpr std::array<std::string_view, 3> kDataSourceNames{"synthetic", "csv", "npy"};
inline constexpr std::array<std::string_view, 4> kMutationPolicyNames{"none", "append_from_pool",
                                                                      "query_by_committee", "command"};
inline constexpr std::array<std::string_view, 4> kCommitteeScoreNames{"std", "entropy", "bald", "epistemic"};
inline constexpr std::array<std::string_view, 2> kBatchModeNames{"top", "diverse"};

constexpr std::span<const std::string_view> NamesOf(ExecutorKind) { return kExecutorNames; }
constexpr std::span<const std::string_view> NamesOf(DataSource) { return kDataSourceNames; }
constexpr std::span<const std::string_view> NamesOf(MutationPolicyKind) { return kMutationPolicyNames; }
constexpr std::span<const std::string_view> NamesOf(CommitteeScore) { return kCommitteeScoreNames; }
constexpr std::span<const std::string_view> NamesOf(BatchMode) { return kBatchModeNames; }

// The "data" keys that name a source's tables, as the config reader checks them
// (common/config/config.cpp CheckDataSource). A closed set: a new source picks one.
enum class DataKeys {
  kGenerated,    // no files: synthetic_features, noise, initial_rows, pool_rows, holdout_rows
  kColumnFiles,  // a file a table, columns by name: train_path (required), pool_path, holdout_path;
                 // target_column or target_columns (required), feature_columns
  kXyPairs,      // a pair of files a table, x and y: x_path and y_path (required; or train_path as
                 // "<path>.x.npy" + "<path>.y.npy"), pool_x_path and pool_y_path (or pool_path),
                 // holdout_path ("<path>.x.npy" + "<path>.y.npy"); y's columns are the targets
};

// What the config asks of a data source besides its name: one row a source, in the enum's order
// (the one table a new source adds a row to; its reader: common/data/data_format.cpp).
struct DataSourceTraits {
  DataKeys keys;
};
inline constexpr std::array<DataSourceTraits, 3> kDataSourceTraits{{
    {.keys = DataKeys::kGenerated},    // synthetic
    {.keys = DataKeys::kColumnFiles},  // csv
    {.keys = DataKeys::kXyPairs},      // npy
}};
static_assert(kDataSourceTraits.size() == kDataSourceNames.size(), "a row of traits per data source");
constexpr const DataSourceTraits& TraitsOf(DataSource s) { return kDataSourceTraits[static_cast<size_t>(s)]; }

}  // namespace ens
