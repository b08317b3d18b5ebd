// PackPlan: which members of a round train together as one fused pack.
//
// Members pack together when they build the same computation (PackKey): model kind, layer units and
// activations, loss kind, optimizer kind, batch size, initializer, validation split (it
// sets the split sizes), adversarial training and early_stopping.refit. Everything else —
// seed, split kind, lr, weight_decay, momentum, l1, l2, huber_delta, dropout rates, epochs,
// the rest of early stopping — is per member inside a pack.
// A member's bits do not depend on its pack (worker/train/trainer.h), so the plan is free to
// depend on the worker count: "auto" spreads each group over the workers. A member of a kind
// that is not packable (ModelKindTraits: a command member is a program of its own, a
// TorchScript member a module of its own) is always a pack of one. So is, when the run has a
// GPU worker, a member the lane kernel does not train (common/config/lane_fit.h): on CUDA its engines
// (PackStep, the autograd loop) give bits that depend on the pack's size, which a retry (the
// decided members dropped) or an out-of-memory split (two halves) would change; alone, it keeps
// its bits through both. Lane members pack as on the CPU: their bits are the same in any pack.
// Pure functions. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace ens {

// "auto" caps a pack at the smaller of two numbers:
//  - kAutoPackMaxMembers, measured (BENCHMARKS.md, bench/pack_throughput.py --sweep): on the
//    CPU, member-steps/s in the loop for seed-000 nearly double from packs of 64 to packs of
//    256 and stay flat, within this machine's noise, from 256 to 4096; a smaller pack loses
//    less work to a crash and reports sooner, so the cap sits at the start of the flat part;
//  - kAutoPackBytes / MemberPackBytes: the pack's training state stays within 1 GiB, so a
//    pack of big models is small (seed-003, 5.1M parameters: 10 members) and the GPU rule is
//    the same budget (an out-of-memory error still splits a pack in halves).
inline constexpr int kAutoPackMaxMembers = 512;
inline constexpr uint64_t kAutoPackBytes = uint64_t{1} << 30;

// What the planner knows of the data (feature count and training rows of the round, the run's
// classes and regression targets) and of the workers (whether any has a GPU).
struct PackShape {
  int features = 1;
  uint64_t train_rows = 0;
  int classes = 0;
  int targets = 1;
  bool gpu = false;
};

// Estimated bytes one member adds to a pack while it trains: parameters with their gradients,
// Adam moments and kept snapshot (20 B each), activations and their gradients for one batch
// (16 B per unit and row), and its row lists (member_rows.h: 8 B per row up to
// MemberRows::kListedRowsMax rows, none above; the pack's index window is bounded apart).
uint64_t MemberPackBytes(const MemberSpec& m, const PackShape& shape);

std::string PackKey(const MemberSpec& m);
// Groups member indices (each pack in index order; packs ordered by their first member).
// pack_size: 1 = no packing; N = at most N members per pack, filled in order;
// 0 = auto: each compatible group is cut into max(ceil(n / cap), min(workers, n)) packs of
// near-equal size, cap = min(kAutoPackMaxMembers, kAutoPackBytes / MemberPackBytes), at least 1,
// so every worker gets work on a small round and no pack outgrows the budget.
std::vector<std::vector<int>> PlanPacks(const std::vector<MemberSpec>& members, int pack_size, int workers = 1,
                                        const PackShape& shape = {});

}  // namespace ens
