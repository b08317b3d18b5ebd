// PackPlan: which members of a round train together as one fused pack.
//
// Members pack together when they build the same computation (PackKey): layer units and
// activations, loss kind, optimizer kind, batch size, initializer and validation split (it
// sets the split sizes). Everything else — seed, split kind, lr, weight_decay, momentum, l1,
// l2, huber_delta, dropout rates, epochs, early stopping — is per member inside a pack.
// A member's bits do not depend on its pack (worker/trainer.h), so the plan is free to
// depend on the worker count: "auto" spreads each group over the workers.
// Pure functions. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace ens {

// Default cap of "auto": big enough for the batching win, small enough to spread packs over workers.
inline constexpr int kAutoPackCap = 32;

std::string PackKey(const MemberSpec& m);
// Groups member indices (each pack in index order; packs ordered by their first member).
// pack_size: 1 = no packing; N = at most N members per pack, filled in order;
// 0 = auto: each compatible group is cut into max(ceil(n / kAutoPackCap), min(workers, n))
// packs of near-equal size, so every worker gets work on a small round.
std::vector<std::vector<int>> PlanPacks(const std::vector<MemberSpec>& members, int pack_size, int workers = 1);

}  // namespace ens
