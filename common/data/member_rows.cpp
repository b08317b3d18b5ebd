#include "common/data/member_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/base/atomic_file.h"

namespace ens {
namespace {

// Salts of the keyed representation's keys; part of the reproducibility contract.
constexpr uint64_t kSplitKeySalt = 0x5350'4C49'5400'0001ULL;
constexpr uint64_t kBootstrapKeySalt = 0x424F'4F54'0000'0002ULL;
constexpr uint64_t kEpochKeySalt = 0x4550'4F43'4800'0003ULL;

// Uniform-enough integer in [0, n) from 64 random bits (multiply-high; the bias is below
// n / 2^64, far under anything a bootstrap can show).
uint64_t Scale(uint64_t bits, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
}

}  // namespace

KeyedPermutation::KeyedPermutation(uint64_t n, uint64_t key) : n_(n) {
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = key;
  for (auto& rk : round_keys_) rk = k = SplitMix64(k);
}

uint64_t KeyedPermutation::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & mask_;
  for (uint64_t rk : round_keys_) {
    uint64_t next = left ^ (SplitMix64(right ^ rk) & mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t KeyedPermutation::operator()(uint64_t x) const {
  // Cycle walking: the Feistel network permutes [0, 4^half_bits); following x's cycle until
  // it re-enters [0, n) restricts it to a permutation of [0, n).
  do x = Encrypt(x);
  while (x >= n_);
  return x;
}

StatusOr<MemberRows> MemberRows::Make(const TaskSpec& task, const ClassOf& class_of) {
  std::vector<uint64_t> excluded;
  if (!task.excluded_file.empty()) {
    auto bytes = ReadFile(task.excluded_file);
    if (!bytes.ok()) return bytes.status();
    if (bytes->size() % sizeof(uint64_t) != 0)
      return Status::Corruption(task.excluded_file + ": not a list of row ids");
    excluded.resize(bytes->size() / sizeof(uint64_t));
    std::memcpy(excluded.data(), bytes->data(), bytes->size());
  }
  return Make(task.rows, std::move(excluded), task.member.validation_split, task.member.split, task.seed,
              task.member.name, class_of);
}

StatusOr<MemberRows> MemberRows::Make(uint64_t rows, std::vector<uint64_t> excluded, double validation_split,
                                      SplitKind split, uint64_t member_seed, const std::string& member,
                                      const ClassOf& class_of) {
  MemberRows m;
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  excluded.erase(std::lower_bound(excluded.begin(), excluded.end(), rows), excluded.end());
  m.dropped_ = std::move(excluded);
  m.listed_ = rows <= kListedRowsMax;
  m.split_ = split;
  m.seed_ = member_seed;
  const uint64_t n = rows - m.dropped_.size();
  const bool stratify = class_of && rows <= kListedRowsMax;
  auto share = [&](uint64_t count) { return static_cast<uint64_t>(std::llround(validation_split * static_cast<double>(count))); };
  std::vector<uint64_t> want;  // stratified: validation rows per class
  uint64_t nval = 0;
  if (stratify) {
    auto drop = m.dropped_.begin();
    for (uint64_t i = 0; i < rows; ++i) {
      if (drop != m.dropped_.end() && *drop == i) {
        ++drop;
        continue;
      }
      const uint32_t c = class_of(i);
      if (c >= want.size()) want.resize(c + 1, 0);
      ++want[c];
    }
    for (auto& w : want) nval += (w = share(w));
  } else {
    nval = share(n);
  }
  if (validation_split > 0) nval = std::max<uint64_t>(nval, 1);  // 0: every row trains
  if (n < (validation_split > 0 ? 2u : 1u) || nval >= n)
    return Status::InvalidArgument("member " + member + ": " + std::to_string(n) +
                                   " training rows are too few for validation_split " +
                                   std::to_string(validation_split));
  m.kept_ = n;
  m.val_size_ = nval;
  m.train_size_ = n - nval;
  const uint64_t split_seed = StreamSeed(member_seed, SeedStream::kSplit);
  if (!m.listed_) {
    m.split_perm_ = KeyedPermutation(n, SplitMix64(split_seed ^ kSplitKeySalt));
    m.bootstrap_key_ = SplitMix64(split_seed ^ kBootstrapKeySalt);
    return m;
  }
  std::vector<uint32_t> perm;
  perm.reserve(n);
  auto drop = m.dropped_.begin();
  for (uint64_t i = 0; i < rows; ++i) {
    if (drop != m.dropped_.end() && *drop == i) {
      ++drop;
      continue;
    }
    perm.push_back(static_cast<uint32_t>(i));
  }
  SeededRng rng(split_seed);
  for (uint64_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.Below(i)]);
  if (stratify) {  // each class's first rows in permutation order validate; order is kept
    // No class has a share (tiny classes): the first row validates, as unstratified.
    if (validation_split > 0 && std::all_of(want.begin(), want.end(), [](uint64_t w) { return w == 0; }))
      want[class_of(perm[0])] = 1;
    std::vector<uint32_t> val, rest;
    for (uint32_t r : perm) {
      uint64_t& w = want[class_of(r)];
      (w > 0 ? val : rest).push_back(r);
      if (w > 0) --w;
    }
    std::copy(val.begin(), val.end(), perm.begin());
    std::copy(rest.begin(), rest.end(), perm.begin() + static_cast<std::ptrdiff_t>(val.size()));
  }
  m.val_.assign(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(nval));
  if (split == SplitKind::kBootstrap) {
    const uint32_t* rest = perm.data() + nval;
    m.train_.resize(m.train_size_);
    for (auto& r : m.train_) r = rest[rng.Below(m.train_size_)];
  } else {
    m.train_.assign(perm.begin() + static_cast<std::ptrdiff_t>(nval), perm.end());
  }
  return m;
}

uint64_t MemberRows::KeptRow(uint64_t j) const {
  // dropped_[i] - i (kept rows before the i-th dropped one) never decreases; every dropped
  // row with dropped_[i] - i <= j lies before the j-th kept row.
  size_t lo = 0, hi = dropped_.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (dropped_[mid] - mid <= j) lo = mid + 1;
    else hi = mid;
  }
  return j + lo;
}

uint64_t MemberRows::TrainRow(uint64_t pos) const {
  uint64_t rest = split_ == SplitKind::kBootstrap ? Scale(SplitMix64(bootstrap_key_ + pos), train_size_) : pos;
  return KeptRow(split_perm_(val_size_ + rest));
}

void MemberRows::Train(uint64_t pos, uint64_t len, int64_t* out) const {
  if (listed_) {
    std::copy(train_.begin() + static_cast<std::ptrdiff_t>(pos), train_.begin() + static_cast<std::ptrdiff_t>(pos + len),
              out);
    return;
  }
  for (uint64_t i = 0; i < len; ++i) out[i] = static_cast<int64_t>(TrainRow(pos + i));
}

void MemberRows::Val(uint64_t pos, uint64_t len, int64_t* out) const {
  if (listed_) {
    std::copy(val_.begin() + static_cast<std::ptrdiff_t>(pos), val_.begin() + static_cast<std::ptrdiff_t>(pos + len), out);
    return;
  }
  for (uint64_t i = 0; i < len; ++i) out[i] = static_cast<int64_t>(KeptRow(split_perm_(pos + i)));
}

uint64_t MemberRows::HeldBytes() const {
  return sizeof(*this) + dropped_.capacity() * sizeof(uint64_t) +
         (train_.capacity() + val_.capacity()) * sizeof(uint32_t);
}

EpochOrder::EpochOrder(const MemberRows& rows)
    : rows_(&rows), shuffle_(StreamSeed(rows.member_seed(), SeedStream::kShuffle)) {
  if (rows.listed()) order_ = rows.train_;
}

void EpochOrder::NextEpoch() {
  NextEpoch(rows_->listed() ? ShuffleBounds(order_.size()) : std::vector<DrawBound>{});
}

void EpochOrder::NextEpoch(const std::vector<DrawBound>& bounds) {
  ++epoch_;
  if (rows_->listed()) {
    const DrawBound* bound = bounds.data();
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[shuffle_.Below(bound[i])]);
    return;
  }
  const uint64_t shuffle_seed = StreamSeed(rows_->member_seed(), SeedStream::kShuffle);
  perm_ = KeyedPermutation(rows_->train_size(), SplitMix64(shuffle_seed ^ kEpochKeySalt) + epoch_);
}

void EpochOrder::Rows(uint64_t pos, uint64_t len, int64_t* out) const {
  if (rows_->listed()) {
    std::copy(order_.begin() + static_cast<std::ptrdiff_t>(pos), order_.begin() + static_cast<std::ptrdiff_t>(pos + len),
              out);
    return;
  }
  for (uint64_t i = 0; i < len; ++i) out[i] = static_cast<int64_t>(rows_->TrainRow(perm_(pos + i)));
}

}  // namespace ens
