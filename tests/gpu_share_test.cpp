// Tests of orchestrator/gpu/gpu_share.h: the allocator setting that holds a worker to its part of
// a GPU, merged into one the user set, and the recycle limit a part implies.
#include "orchestrator/gpu/gpu_share.h"

#include <catch2/catch.hpp>

namespace ens {
namespace {

TEST_CASE("a worker's part becomes per_process_memory_fraction - the user's other options are kept", "[gpu][share]") {
  CHECK(AllocatorConfWithFraction("", 0.125) == "per_process_memory_fraction:0.125");
  CHECK(AllocatorConfWithFraction("expandable_segments:True", 0.25) ==
        "expandable_segments:True,per_process_memory_fraction:0.25");
  // A fraction the user set is replaced: the daemon's share is the one that holds.
  CHECK(AllocatorConfWithFraction("per_process_memory_fraction:0.9,max_split_size_mb:128", 0.5) ==
        "max_split_size_mb:128,per_process_memory_fraction:0.5");
  CHECK(AllocatorConfWithFraction("a:1,, per_process_memory_fraction:1", 0.0078125) ==
        "a:1,per_process_memory_fraction:0.0078125");
}

TEST_CASE("a part sets the recycle limit unless a smaller one is configured", "[gpu][share]") {
  CHECK(WorkerReserveLimitMb(0, 0) == 0);         // neither: off
  CHECK(WorkerReserveLimitMb(3000, 0) == 3000);   // whole GPU: as configured
  CHECK(WorkerReserveLimitMb(0, 2048) == 2048);   // a part, no limit set: the part
  CHECK(WorkerReserveLimitMb(1000, 2048) == 1000);
  CHECK(WorkerReserveLimitMb(9000, 2048) == 2048);
}

}  // namespace
}  // namespace ens
