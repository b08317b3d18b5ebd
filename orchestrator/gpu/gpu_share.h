// GpuShare: how a worker is held to its part of a GPU (resources.gpu_memory_gb, config.h).
//
// A worker whose placement has a memory_fraction (orchestrator/gpu/gpu_discovery.h) gets
// PYTORCH_CUDA_ALLOC_CONF with per_process_memory_fraction set to it: its CUDA caching
// allocator refuses to reserve more (an allocation past it is an out-of-memory error in that
// worker, whose task fails and is retried; never another run's). Its recycle limit
// (recycle.gpu_reserved_mb) becomes its part when none is set or the set one is larger: a
// worker that keeps more than its part reserved after a task exits and is replaced.
// The CUDA context itself (a few hundred MiB a process) is outside the allocator: the serve
// daemon counts kGpuContextReserveBytes per worker on top of each share (run_queue.h).
// Pure functions. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace ens {

// What the serve daemon counts per worker process on a shared GPU besides its share.
inline constexpr uint64_t kGpuContextReserveBytes = uint64_t{512} << 20;

// `inherited` (the supervisor's own PYTORCH_CUDA_ALLOC_CONF, "" when unset) with
// per_process_memory_fraction:<fraction> in place of any it had; the other options kept.
// REQUIRES: 0 < fraction <= 1.
std::string AllocatorConfWithFraction(const std::string& inherited, double fraction);

// The recycle limit of a worker with a part of `part_mb` MiB (0: no part) when the run's
// recycle.gpu_reserved_mb is `configured_mb` (0: off): the smaller of the two that are set.
double WorkerReserveLimitMb(double configured_mb, double part_mb);

}  // namespace ens
