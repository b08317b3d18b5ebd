// PackPlan: which members of a round train together as one fused pack.
//
// Members pack together when everything that shapes the batched model and its optimizer is
// equal (PackKey): layers, loss, optimizer and its settings, lr, epochs, batch size, L1/L2,
// validation split. They may differ by seed, initializer, split kind and early stopping.
// The plan depends only on the config — never on worker count or timing — because a packed
// member's bits depend on its pack's composition; retries and resumes re-run the same packs.
// Pure functions. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace ens {

// Default cap of "auto": big enough for the batching win, small enough to spread packs over workers.
inline constexpr int kAutoPackCap = 32;

std::string PackKey(const MemberSpec& m);
// Groups member indices (each group in index order; groups ordered by their first member).
// pack_size: 1 = no packing; 0 = auto (kAutoPackCap); N = at most N members per pack.
std::vector<std::vector<int>> PlanPacks(const std::vector<MemberSpec>& members, int pack_size);

}  // namespace ens
