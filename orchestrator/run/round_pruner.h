// RoundPruner: applies the run's retention policy (common/state/retention.h) to its committed
// rounds, at each commit and when a run resumes.
//
// Each due change of level is journaled first (round_pruned, one fsync for all of them), then
// the round's member files are removed: a crash in between leaves files the journal says are
// gone, and the next Prune with `finish_interrupted` (a resume) removes them. Nothing a kept
// round needs is touched (retention.h). A file that cannot be removed is logged and left;
// only a journal that cannot be written is an error. Single-threaded (the supervisor's loop).
#pragma once

#include <cstdint>

#include "common/state/journal.h"
#include "common/state/retention.h"
#include "common/state/run_layout.h"
#include "common/base/status.h"

namespace ens {

struct PruneOutcome {
  int rounds_lowered = 0;  // round_pruned records written
  uint64_t bytes_freed = 0;
};

// Lowers every committed round `progress` says holds more than `spec` wants. With
// `finish_interrupted`, first removes again what the round_pruned records since the last
// commit named (a crash may have cut those removals short). progress->Apply sees each record
// written.
StatusOr<PruneOutcome> PruneRounds(const RetentionSpec& spec, const RunLayout& layout, Journal* journal,
                                   RunProgress* progress, bool finish_interrupted);

}  // namespace ens
