// Tests of orchestrator/serve/submit_policy: a submitter's priority within its kind's bounds
// (administrators higher), and per-uid quotas over its queued and running runs, each refusal
// naming the limit's pointer.
#include "orchestrator/serve/submit_policy.h"

#include <catch2/catch.hpp>
#include <climits>

namespace ens {
namespace {

TEST_CASE("a priority is refused outside its submitter's bounds, naming the limit", "[serve][policy]") {
  SubmitterLimits l;  // -100 .. 10, administrators to 1000
  CHECK(RefusePriority(0, false, l).empty());
  CHECK(RefusePriority(10, false, l).empty());
  CHECK(RefusePriority(-100, false, l).empty());
  CHECK_THAT(RefusePriority(11, false, l), Catch::StartsWith("/limits/max_priority: priority 11 is above"));
  CHECK(RefusePriority(11, true, l).empty());
  CHECK(RefusePriority(1000, true, l).empty());
  CHECK_THAT(RefusePriority(1001, true, l), Catch::StartsWith("/limits/admin_max_priority"));
  CHECK_THAT(RefusePriority(-101, true, l), Catch::StartsWith("/limits/min_priority"));
  CHECK_THAT(RefusePriority(LLONG_MAX, true, l), Catch::StartsWith("/limits/admin_max_priority"));
  CHECK_THAT(RefusePriority(LLONG_MIN, false, l), Catch::StartsWith("/limits/min_priority"));
  CHECK_THAT(RefusePriority(static_cast<long long>(INT_MAX) + 1, false, l), Catch::Contains("2147483648"));
}

TEST_CASE("quotas count a uid's queued and running runs, GPUs and CPU workers - 0 is no limit", "[serve][policy]") {
  SubmitterLimits l;
  RunAsk cpu;
  cpu.cpu_workers = 2;
  RunAsk two_gpus;
  two_gpus.gpu_count = 2;
  RunAsk named;
  named.gpus = {"0", "1", "2"};
  CHECK(GpusOf(two_gpus) == 2);
  CHECK(GpusOf(named) == 3);
  CHECK(GpusOf(cpu) == 0);
  CHECK(RefuseQuota(1001, {100, 100, 100}, cpu, l).empty());  // no limits set
  l.runs = 2;
  CHECK(RefuseQuota(1001, {1, 0, 0}, cpu, l).empty());
  CHECK(RefuseQuota(1001, {2, 0, 0}, cpu, l) ==
        "/limits/runs: uid 1001 has 2 runs queued or running; the limit is 2");
  l = SubmitterLimits{};
  l.gpus = 4;
  CHECK(RefuseQuota(7, {1, 2, 0}, two_gpus, l).empty());
  CHECK_THAT(RefuseQuota(7, {1, 2, 0}, named, l), Catch::StartsWith("/limits/gpus: uid 7's runs ask 2 GPUs and this one 3"));
  l = SubmitterLimits{};
  l.cpu_workers = 3;
  CHECK(RefuseQuota(7, {1, 0, 1}, cpu, l).empty());
  CHECK_THAT(RefuseQuota(7, {1, 0, 2}, cpu, l), Catch::StartsWith("/limits/cpu_workers"));
}

}  // namespace
}  // namespace ens
