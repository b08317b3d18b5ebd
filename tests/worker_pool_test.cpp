// Tests of WorkerPool's slot transition table (NextSlotState): the properties the pool relies
// on. The pool's behaviour with real workers is in local_executor_test, worker_recycling_test,
// hung_worker_test, restart_budget_test and worker_cuda_support_test.
#include "orchestrator/workers/worker_pool.h"

#include <catch2/catch.hpp>

namespace ens {
namespace {

using S = SlotState;
using E = SlotEvent;

constexpr S kAllStates[] = {S::kDown, S::kStarting, S::kIdle, S::kBusy, S::kStopping, S::kUnusable};
constexpr E kAllEvents[] = {E::kSpawned,  E::kStartFailed, E::kReady,   E::kAssigned, E::kReported,
                            E::kReportedRecycle, E::kExited, E::kGivenUp, E::kShutdown, E::kReleased};

TEST_CASE("worker slots: nothing leaves kUnusable, so a given-up slot is never respawned", "[worker_pool]") {
  for (E e : kAllEvents) {
    INFO(static_cast<int>(e));
    CHECK_FALSE(NextSlotState(S::kUnusable, e).has_value());
  }
  // Given up: from a slot with no worker (a hopeless start) or one not yet ready, nowhere else.
  for (S from : kAllStates) {
    INFO(SlotStateName(from));
    auto to = NextSlotState(from, E::kGivenUp);
    CHECK(to.has_value() == (from == S::kDown || from == S::kStarting));
    if (to) CHECK(*to == S::kUnusable);
  }
}

TEST_CASE("worker slots: a worker starts only from kDown and takes tasks only when idle", "[worker_pool]") {
  for (S from : kAllStates)
    for (E e : kAllEvents) {
      INFO(SlotStateName(from) << " event " << static_cast<int>(e));
      auto to = NextSlotState(from, e);
      if (to && *to == S::kStarting) CHECK((from == S::kDown && e == E::kSpawned));
      if (to && *to == S::kBusy) CHECK((from == S::kIdle && e == E::kAssigned));
      if (to && *to == S::kIdle) CHECK(((from == S::kStarting && e == E::kReady) || (from == S::kBusy && e == E::kReported)));
    }
  // A second "ready", a report when not busy: ignored, not a move.
  CHECK_FALSE(NextSlotState(S::kIdle, E::kReady).has_value());
  CHECK_FALSE(NextSlotState(S::kIdle, E::kReported).has_value());
  CHECK_FALSE(NextSlotState(S::kBusy, E::kAssigned).has_value());
}

TEST_CASE("worker slots: an exit or a release leaves every live slot down, a recycle stops first", "[worker_pool]") {
  for (S from : {S::kStarting, S::kIdle, S::kBusy, S::kStopping}) {
    INFO(SlotStateName(from));
    CHECK(NextSlotState(from, E::kExited) == S::kDown);
    CHECK(NextSlotState(from, E::kShutdown) == S::kStopping);
  }
  for (S from : kAllStates) {
    INFO(SlotStateName(from));
    CHECK(NextSlotState(from, E::kReleased) == (from == S::kUnusable ? std::nullopt : std::optional<S>(S::kDown)));
  }
  CHECK(NextSlotState(S::kBusy, E::kReportedRecycle) == S::kStopping);
  CHECK(NextSlotState(S::kDown, E::kStartFailed) == S::kDown);
  CHECK(std::string(SlotStateName(S::kUnusable)) == "unusable");
}

}  // namespace
}  // namespace ens
