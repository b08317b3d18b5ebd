// MemberRows and EpochOrder: which table rows a member trains and validates on, and in which
// order it sees its training rows each epoch.
//
// Both are functions of the member alone: its seed, the generation's row count, the rows a
// mutation dropped (excluded_file), validation_split and split kind. Never of its pack.
//
// Two exact representations, picked by the generation's row count and nothing else:
//  - Listed (rows <= kListedRowsMax): the split is a seeded Fisher-Yates permutation of the
//    kept rows (validation = its first round(f * n), at least 1; training = the rest, or a
//    bootstrap sample of the rest), and each epoch's order is a Fisher-Yates pass over the
//    previous epoch's. Rows are held as uint32: 4 B per training row for the split and 4 B for
//    the order. This is the representation every earlier version used, bit for bit.
//  - Keyed (rows > kListedRowsMax): nothing per row is held, so a worker on a table of 10^8
//    rows holds O(1) per member beyond the shared mapping. Position i of the split is P(i) for
//    a keyed bijection P of [0, n) (KeyedPermutation); epoch e's order is another bijection
//    keyed by (shuffle seed, e); a bootstrap draw is a keyed hash of the position. Each lookup
//    costs a few tens of ns, paid per row per epoch.
// Dropped rows are skipped by rank: split position -> j-th kept row (binary search over the
// sorted dropped list, which both representations hold).
// Classification (a class per row given): a listed split is stratified — validation takes the
// first round(f * n_c) rows of each class c in the permutation's order (at least 1 in all),
// training the rest in that order — so every member validates on each class in proportion.
// A keyed split is not (at over 2^20 rows a random split's class shares are within a fraction
// of a percent of the table's).
// Thread-compatible: const methods may run concurrently; NextEpoch may not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"
#include "common/base/seed.h"
#include "common/base/status.h"

namespace ens {

// A bijection of [0, n) keyed by a 64-bit key: a 4-round balanced Feistel network on the
// smallest even number of bits covering n, with cycle walking back into [0, n) (at most 4
// encryptions on average). Pure; thread-safe. REQUIRES: n >= 1.
class KeyedPermutation {
 public:
  KeyedPermutation() = default;
  KeyedPermutation(uint64_t n, uint64_t key);
  // REQUIRES: x < n.
  uint64_t operator()(uint64_t x) const;
  uint64_t size() const { return n_; }

 private:
  uint64_t Encrypt(uint64_t x) const;
  uint64_t n_ = 1;
  int half_bits_ = 1;
  uint64_t mask_ = 1;
  uint64_t round_keys_[4] = {0, 0, 0, 0};
};

class MemberRows {
 public:
  static constexpr uint64_t kListedRowsMax = uint64_t{1} << 20;

  // The split of task.rows rows less those in task.excluded_file. Errors: the excluded file
  // unreadable or not a list of uint64 row ids (names the file); too few rows for the
  // member's validation_split (names the member).
  // class_of (classification): a row's class; empty for regression.
  using ClassOf = std::function<uint32_t(uint64_t row)>;
  static StatusOr<MemberRows> Make(const TaskSpec& task, const ClassOf& class_of = {});
  // The same from its parts (tests, benchmarks). `excluded` need not be sorted or unique.
  static StatusOr<MemberRows> Make(uint64_t rows, std::vector<uint64_t> excluded, double validation_split,
                                   SplitKind split, uint64_t member_seed, const std::string& member,
                                   const ClassOf& class_of = {});

  uint64_t train_size() const { return train_size_; }
  uint64_t val_size() const { return val_size_; }
  bool listed() const { return listed_; }
  uint64_t member_seed() const { return seed_; }
  // Table rows at split positions [pos, pos + len): training rows in split order, and
  // validation rows. REQUIRES: pos + len <= train_size() (val_size()).
  void Train(uint64_t pos, uint64_t len, int64_t* out) const;
  void Val(uint64_t pos, uint64_t len, int64_t* out) const;
  // Bytes held per member (what a pack of K holds K times).
  uint64_t HeldBytes() const;

 private:
  friend class EpochOrder;
  uint64_t KeptRow(uint64_t kept_index) const;  // the kept_index-th row not dropped
  uint64_t TrainRow(uint64_t pos) const;        // keyed representation

  bool listed_ = true;
  SplitKind split_ = SplitKind::kRandom;
  uint64_t seed_ = 0, kept_ = 0, train_size_ = 0, val_size_ = 0, bootstrap_key_ = 0;
  std::vector<uint64_t> dropped_;  // sorted, unique, each < rows
  std::vector<uint32_t> train_, val_;  // listed only
  KeyedPermutation split_perm_;        // keyed only
};

// A member's training order, epoch by epoch. Holds its own copy of a listed member's order
// (4 B per training row) and nothing per row for a keyed one. `rows` must outlive it.
class EpochOrder {
 public:
  explicit EpochOrder(const MemberRows& rows);
  // Moves to the next epoch's order; call before every epoch, the first one too. Makes the
  // shuffle's bounds each call (a division a row): a pack's loop uses the overload below.
  void NextEpoch();
  // The same order, its shuffle's bounds made beforehand: a pack's members share one
  // ShuffleBounds(train_size). REQUIRES: bounds.size() > rows.train_size() for a
  // listed member (a keyed one reads no bounds: {} will do).
  void NextEpoch(const std::vector<DrawBound>& bounds);
  // Table rows at positions [pos, pos + len) of this epoch's order.
  // REQUIRES: NextEpoch called at least once; pos + len <= rows.train_size().
  void Rows(uint64_t pos, uint64_t len, int64_t* out) const;

 private:
  const MemberRows* rows_;
  SeededRng shuffle_;
  uint64_t epoch_ = 0;
  std::vector<uint32_t> order_;  // listed only
  KeyedPermutation perm_;        // keyed only
};

}  // namespace ens
