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
// data.source: the built-in synthetic data, or files.
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

}  // namespace ens
