#include "common/data/member_rows.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <vector>

#include "common/base/seed.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

std::vector<int64_t> TrainOf(const MemberRows& m) {
  std::vector<int64_t> v(m.train_size());
  m.Train(0, v.size(), v.data());
  return v;
}
std::vector<int64_t> ValOf(const MemberRows& m) {
  std::vector<int64_t> v(m.val_size());
  m.Val(0, v.size(), v.data());
  return v;
}
std::vector<int64_t> EpochOf(const EpochOrder& o, uint64_t n) {
  std::vector<int64_t> v(n);
  o.Rows(0, n, v.data());
  return v;
}

// The split as every version before MemberRows made it (int64 lists): the listed
// representation must give these rows, in this order, bit for bit.
void ReferenceSplit(uint64_t rows, const std::vector<uint64_t>& excluded, double f, SplitKind kind, uint64_t seed,
                    std::vector<int64_t>* train, std::vector<int64_t>* val) {
  std::vector<int64_t> perm;
  for (uint64_t i = 0; i < rows; ++i)
    if (std::find(excluded.begin(), excluded.end(), i) == excluded.end()) perm.push_back(static_cast<int64_t>(i));
  const uint64_t n = perm.size();
  uint64_t nval = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(f * static_cast<double>(n))));
  SeededRng rng(StreamSeed(seed, SeedStream::kSplit));
  for (uint64_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.Below(i)]);
  val->assign(perm.begin(), perm.begin() + nval);
  std::vector<int64_t> rest(perm.begin() + nval, perm.end());
  if (kind == SplitKind::kBootstrap) {
    train->resize(rest.size());
    for (auto& r : *train) r = rest[rng.Below(rest.size())];
  } else {
    *train = rest;
  }
}

TEST_CASE("a keyed permutation is a bijection of 0..n-1 for every n, and the key decides it", "[rows]") {
  for (uint64_t n : {1, 2, 3, 5, 16, 17, 1000, 4097, 65537}) {
    KeyedPermutation p(n, 42), q(n, 43);
    std::vector<bool> seen(n, false);
    uint64_t same_as_q = 0, fixed = 0;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t y = p(i);
      REQUIRE(y < n);
      REQUIRE_FALSE(seen[y]);
      seen[y] = true;
      same_as_q += y == q(i);
      fixed += y == i;
      CHECK(KeyedPermutation(n, 42)(i) == y);  // a function of (n, key) only
    }
    if (n >= 1000) {
      CHECK(same_as_q < n / 50);  // another key, another order
      CHECK(fixed < n / 50);      // and not the identity
    }
  }
}

TEST_CASE("up to kListedRowsMax rows the split and epoch orders are the earlier lists, bit for bit", "[rows]") {
  const std::vector<uint64_t> excluded = {3, 17, 18, 400, 799};
  for (SplitKind kind : {SplitKind::kRandom, SplitKind::kBootstrap}) {
    const uint64_t seed = MemberSeed(9, 2, 1);
    auto m = MemberRows::Make(800, excluded, 0.2, kind, seed, "m2");
    REQUIRE(m.ok());
    CHECK(m->listed());
    std::vector<int64_t> train, val;
    ReferenceSplit(800, excluded, 0.2, kind, seed, &train, &val);
    CHECK(TrainOf(*m) == train);
    CHECK(ValOf(*m) == val);
    // Epochs: Fisher-Yates passes over the previous epoch's order with the shuffle stream.
    // The trainer's overload, with a pack's shared bounds (made for more rows than this
    // member's, as for a pack whose largest member has more), gives the same orders.
    SeededRng shuffle(StreamSeed(seed, SeedStream::kShuffle));
    EpochOrder order(*m), by_bounds(*m);
    const std::vector<DrawBound> bounds = ShuffleBounds(m->train_size() + 17);
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (size_t i = train.size(); i > 1; --i) std::swap(train[i - 1], train[shuffle.Below(i)]);
      order.NextEpoch();
      by_bounds.NextEpoch(bounds);
      CHECK(EpochOf(order, train.size()) == train);
      CHECK(EpochOf(by_bounds, train.size()) == train);
    }
  }
}

TEST_CASE("above kListedRowsMax nothing per row is held and the split is still exact", "[rows]") {
  const uint64_t rows = MemberRows::kListedRowsMax + 5000;
  std::vector<uint64_t> excluded = {0, 1, 2, 999, 123456, rows - 1, rows + 7 /* beyond the table: ignored */, 999};
  auto m = MemberRows::Make(rows, excluded, 0.1, SplitKind::kRandom, 77, "big");
  REQUIRE(m.ok());
  CHECK_FALSE(m->listed());
  const uint64_t kept = rows - 6;
  CHECK(m->val_size() == static_cast<uint64_t>(std::llround(0.1 * kept)));
  CHECK(m->train_size() == kept - m->val_size());
  CHECK(m->HeldBytes() < 1024);

  // Validation and training rows partition the kept rows.
  std::vector<uint8_t> seen(rows, 0);
  for (const auto& part : {ValOf(*m), TrainOf(*m)})
    for (int64_t r : part) {
      REQUIRE(r >= 0);
      REQUIRE(static_cast<uint64_t>(r) < rows);
      REQUIRE(seen[r] == 0);
      seen[r] = 1;
    }
  for (uint64_t r : std::vector<uint64_t>{0, 1, 2, 999, 123456, rows - 1}) CHECK(seen[r] == 0);
  CHECK(static_cast<uint64_t>(std::count(seen.begin(), seen.end(), 1)) == kept);

  // Each epoch's order is a permutation of the training rows, another one every epoch, and
  // the same for the same member.
  std::vector<int64_t> sorted_train = TrainOf(*m);
  std::sort(sorted_train.begin(), sorted_train.end());
  EpochOrder a(*m), b(*m);
  std::vector<int64_t> previous;
  for (int epoch = 0; epoch < 2; ++epoch) {
    a.NextEpoch();
    b.NextEpoch({});  // a keyed member's order needs no bounds
    std::vector<int64_t> e = EpochOf(a, m->train_size());
    CHECK(e == EpochOf(b, m->train_size()));
    CHECK(e != previous);
    previous = e;
    std::sort(e.begin(), e.end());
    CHECK(e == sorted_train);
  }
  // Any window of an epoch is the same rows as the whole epoch's slice.
  std::vector<int64_t> window(1000);
  a.Rows(70000, window.size(), window.data());
  std::vector<int64_t> whole = EpochOf(a, m->train_size());
  CHECK(std::equal(window.begin(), window.end(), whole.begin() + 70000));
}

TEST_CASE("a keyed bootstrap draws from the non-validation rows, with repeats", "[rows]") {
  const uint64_t rows = MemberRows::kListedRowsMax + 1;
  auto m = MemberRows::Make(rows, {}, 0.25, SplitKind::kBootstrap, 5, "boot");
  REQUIRE(m.ok());
  std::vector<int64_t> val = ValOf(*m), train = TrainOf(*m);
  CHECK(train.size() == rows - val.size());
  std::vector<uint8_t> is_val(rows, 0);
  for (int64_t r : val) is_val[r] = 1;
  std::set<int64_t> distinct;
  for (int64_t r : train) {
    REQUIRE(is_val[r] == 0);
    distinct.insert(r);
  }
  // A bootstrap of n draws hits about 1 - 1/e = 63% of the rows it draws from.
  const double hit = static_cast<double>(distinct.size()) / static_cast<double>(train.size());
  CHECK(hit > 0.60);
  CHECK(hit < 0.66);
}

TEST_CASE("a table of 10^9 rows costs a member O(1) memory and any position is answered", "[rows]") {
  auto m = MemberRows::Make(1'000'000'000, {5}, 0.2, SplitKind::kRandom, 1, "huge");
  REQUIRE(m.ok());
  CHECK(m->HeldBytes() < 1024);
  EpochOrder o(*m);
  o.NextEpoch();
  int64_t r[4];
  o.Rows(m->train_size() - 4, 4, r);
  for (int64_t v : r) CHECK((v >= 0 && v < 1'000'000'000 && v != 5));
}

TEST_CASE("too few rows name the member - a bad excluded file names the file", "[rows]") {
  auto small = MemberRows::Make(2, {1}, 0.5, SplitKind::kRandom, 1, "tiny");
  REQUIRE_FALSE(small.ok());
  CHECK_THAT(small.status().message(), Catch::Contains("member tiny") && Catch::Contains("too few"));

  testing::TempDir dir;
  std::ofstream(dir.File("excluded.u64")) << "12345";  // 5 bytes: not uint64 ids
  TaskSpec t;
  t.rows = 100;
  t.member.name = "m0";
  t.excluded_file = dir.File("excluded.u64");
  auto bad = MemberRows::Make(t);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains(dir.File("excluded.u64")));
  t.excluded_file = dir.File("missing.u64");
  auto missing = MemberRows::Make(t);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("missing.u64"));
}

TEST_CASE("A classifier's validation rows are stratified by class", "[rows]") {
  // 1000 rows: classes 0, 1, 2 in shares 70%, 20%, 10%.
  auto class_of = [](uint64_t r) { return static_cast<uint32_t>(r % 10 < 7 ? 0 : r % 10 < 9 ? 1 : 2); };
  for (uint64_t seed : {1, 2, 3}) {
    auto m = MemberRows::Make(1000, {3, 17}, 0.2, SplitKind::kRandom, seed, "c", class_of);
    REQUIRE(m.ok());
    std::vector<int64_t> val(m->val_size()), train(m->train_size());
    m->Val(0, val.size(), val.data());
    m->Train(0, train.size(), train.data());
    std::vector<int> per_class(3, 0);
    for (int64_t r : val) ++per_class[class_of(static_cast<uint64_t>(r))];
    // Kept rows per class: 699 (two dropped of class 0), 200, 100.
    CHECK(per_class == std::vector<int>{140, 40, 20});
    CHECK(val.size() + train.size() == 998);
    std::vector<int64_t> all(val);
    all.insert(all.end(), train.begin(), train.end());
    std::sort(all.begin(), all.end());
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());  // a partition of the kept rows
    CHECK(std::find(all.begin(), all.end(), 17) == all.end());
  }
  // Another seed, other rows; the same counts.
  auto a = MemberRows::Make(1000, {}, 0.2, SplitKind::kRandom, 1, "c", class_of);
  auto b = MemberRows::Make(1000, {}, 0.2, SplitKind::kRandom, 2, "c", class_of);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<int64_t> va(a->val_size()), vb(b->val_size());
  a->Val(0, va.size(), va.data());
  b->Val(0, vb.size(), vb.data());
  CHECK(va != vb);
  // Regression (no classes) keeps the split every earlier version made.
  auto plain = MemberRows::Make(1000, {}, 0.2, SplitKind::kRandom, 1, "r");
  auto plain_again = MemberRows::Make(1000, {}, 0.2, SplitKind::kRandom, 1, "r", {});
  REQUIRE(plain.ok());
  REQUIRE(plain_again.ok());
  std::vector<int64_t> pa(plain->val_size()), pb(plain_again->val_size());
  plain->Val(0, pa.size(), pa.data());
  plain_again->Val(0, pb.size(), pb.data());
  CHECK(pa == pb);
}

}  // namespace
}  // namespace ens
