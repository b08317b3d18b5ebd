// MutationPolicy: how the training set changes between round r and r+1.
//
//   none                nothing changes
//   append_from_pool    k pool rows not used yet, drawn with a generator seeded from
//                       (run seed, round): the same run makes the same draw after a restart
//   query_by_committee  the k unused pool rows the members disagree on most, scored by
//                       spec.score (committee_score.h), ties broken by the lower row id;
//                       with spec.batch "diverse", k rows both uncertain and spread out
//                       (diverse_batch.h)
//   command             an external program (argv, no shell) reads the round summary JSON on
//                       stdin (with "run": where the run's data and predictions are,
//                       mutation_view.h) and writes {"add": [[x..., y], ...], "drop": [row ids],
//                       "take": [pool row ids]} on stdout, each key optional (classification:
//                       y is a class label, a string or an integer, one of the run's classes;
//                       taken pool rows move into train with their labels, as the pool
//                       policies move them);
//                       exit code 0 and the timeout are enforced, the output validated like data
// Decisions are pure functions of their inputs (except `command`, which is as pure as the
// program). Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/class_list.h"
#include "common/config/config.h"
#include "common/state/member_result.h"
#include "common/config/run_head.h"
#include "common/base/status.h"
#include "common/base/table.h"

namespace ens {

struct MutationContext {
  int round = 0;
  uint64_t run_seed = 0;
  const Table* pool = nullptr;
  const std::vector<bool>* pool_used = nullptr;       // pool.rows() flags
  const std::vector<MemberResult>* members = nullptr;  // this round's finished members
  nlohmann::json round_summary;                        // given to `command` on stdin
  int features = 0;
  uint64_t train_rows = 0;                             // drop ids must be below this
  // `command` only: called at least every 200 ms while the program runs (the supervisor
  // pings the systemd watchdog and serves its control socket meanwhile). Returning false
  // abandons the program: it is killed with its process group and the decision fails with
  // kCancelled. May be empty.
  std::function<bool()> on_wait;
  // `command` only: added to the program's environment (mutation_view.h).
  std::vector<std::pair<std::string, std::string>> command_env;
  // Classification: the run's classes (predictions are rows x classes, a command's targets
  // are labels); null for regression.
  const ClassList* classes = nullptr;
  // What the members predict: the width of their prediction rows, the score a committee
  // computes (a Gaussian head's "std" is "epistemic"), the targets per added row (table.h).
  RunHead head = RunHead::Regression();
};

struct Mutation {
  std::vector<uint64_t> pool_ids;   // pool rows to move into train, in order
  Table add;                        // rows from a command (features set even when empty)
  std::vector<uint64_t> drop;       // train row ids to exclude from now on, sorted, unique
  bool empty() const { return pool_ids.empty() && add.rows() == 0 && drop.empty(); }
};

StatusOr<Mutation> DecideMutation(const MutationSpec& spec, const MutationContext& ctx);

// Parses and validates a command's output. `origin` names the command in errors. `classes`
// (classification): each row's target is a label, stored as its class index. An added row
// is features then `targets` target numbers (one label for classification). `pool_used`:
// the pool's rows, true where taken already (null: no pool); a taken id must be below its
// size, unused and listed once, else an error names it (/take/i).
StatusOr<Mutation> ParseCommandOutput(const std::string& text, int features, uint64_t train_rows,
                                      const std::string& origin, const ClassList* classes = nullptr,
                                      int targets = 1, const std::vector<bool>* pool_used = nullptr);

}  // namespace ens
