#include "orchestrator/run/pack_plan.h"

#include <catch2/catch.hpp>

#include "common/data/member_rows.h"

namespace ens {
namespace {

MemberSpec Member(int units, OptimizerKind optimizer = OptimizerKind::kAdam) {
  MemberSpec m;
  m.layers = {{units, Activation::kRelu, 0.0}};
  m.optimizer = optimizer;
  return m;
}

TEST_CASE("compatible members pack together in index order - others apart", "[pack]") {
  std::vector<MemberSpec> ms = {Member(8), Member(16), Member(8), Member(16), Member(8, OptimizerKind::kSgd)};
  auto packs = PlanPacks(ms, 0);
  REQUIRE(packs.size() == 3);
  CHECK(packs[0] == std::vector<int>{0, 2});
  CHECK(packs[1] == std::vector<int>{1, 3});
  CHECK(packs[2] == std::vector<int>{4});
}

TEST_CASE("per-member hyperparameters do not split a pack - shapes and kinds do", "[pack]") {
  MemberSpec a = Member(8), b = Member(8);
  b.seed_offset = 7;
  b.split = SplitKind::kBootstrap;
  b.early_stopping.enabled = true;
  b.early_stopping.patience = 0;
  b.lr = 0.01;
  b.weight_decay = 0.1;
  b.momentum = 0.5;
  b.l1 = 1e-3;
  b.l2 = 1e-2;
  b.huber_delta = 0.2;
  b.epochs = 7;
  b.layers[0].dropout = 0.3;
  CHECK(PackKey(a) == PackKey(b));
  auto differs = [&](auto change) {
    MemberSpec c = a;
    change(c);
    return PackKey(a) != PackKey(c);
  };
  CHECK(differs([](MemberSpec& c) { c.layers[0].units = 9; }));
  CHECK(differs([](MemberSpec& c) { c.layers[0].activation = Activation::kTanh; }));
  CHECK(differs([](MemberSpec& c) { c.layers.push_back({4, Activation::kRelu, 0.0}); }));
  CHECK(differs([](MemberSpec& c) { c.loss = LossKind::kHuber; }));
  CHECK(differs([](MemberSpec& c) { c.optimizer = OptimizerKind::kSgd; }));
  CHECK(differs([](MemberSpec& c) { c.batch_size = 16; }));
  CHECK(differs([](MemberSpec& c) { c.initializer = Initializer::kHeUniform; }));
  CHECK(differs([](MemberSpec& c) { c.validation_split = 0.3; }));
  // Their second part trains on every row: other split sizes than a member that keeps its split.
  CHECK(differs([](MemberSpec& c) { c.early_stopping.enabled = c.early_stopping.refit = true; }));
  // Two packable kinds of the same layers never share a pack: the kind is part of the key.
  CHECK(differs([](MemberSpec& c) { c.model.kind = ModelKind::kTorchscript; }));
}

TEST_CASE("auto spreads a small group over the workers - the cap still holds", "[pack]") {
  std::vector<MemberSpec> ms(8, Member(4));
  auto two = PlanPacks(ms, 0, 2);
  REQUIRE(two.size() == 2);
  CHECK(two[0] == std::vector<int>{0, 1, 2, 3});
  CHECK(two[1] == std::vector<int>{4, 5, 6, 7});
  CHECK(PlanPacks(ms, 0, 16).size() == 8);  // never an empty pack
  CHECK(PlanPacks(ms, 0, 1).size() == 1);
  std::vector<MemberSpec> many(1100, Member(4));
  auto spread = PlanPacks(many, 0, 2);
  REQUIRE(spread.size() == 3);  // ceil(1100 / kAutoPackMaxMembers)
  for (const auto& p : spread) CHECK(p.size() <= static_cast<size_t>(kAutoPackMaxMembers));
  CHECK(spread[0].size() == 367);
  CHECK(PlanPacks(ms, 3, 4).size() == 3);  // an explicit size ignores the worker count
}

TEST_CASE("auto keeps a pack's estimated training memory within kAutoPackBytes", "[pack]") {
  // seed-003's shape: 100 -> 1000 -> 5000 -> 1, about 5.1M parameters, ~102 MB each to train.
  MemberSpec big;
  big.layers = {{1000, Activation::kSwish, 0.0}, {5000, Activation::kSwish, 0.0}};
  const PackShape shape{100, 80};
  const uint64_t each = MemberPackBytes(big, shape);
  CHECK(each > 20 * 5'100'000ULL);
  CHECK(each < 20 * 5'200'000ULL + 16 * 6001 * 32 + 8 * 80);
  auto packs = PlanPacks(std::vector<MemberSpec>(100, big), 0, 1, shape);
  const size_t fit = static_cast<size_t>(kAutoPackBytes / each);
  CHECK(fit == 10);
  REQUIRE(packs.size() == 10);
  for (const auto& p : packs) CHECK(p.size() * each <= kAutoPackBytes);
  // Rows count too while members hold row lists (8 B a row up to kListedRowsMax rows)...
  const PackShape listed{9, MemberRows::kListedRowsMax};
  const uint64_t small = MemberPackBytes(Member(4), listed);
  CHECK(small > 8 * MemberRows::kListedRowsMax);
  const size_t per_pack = static_cast<size_t>(kAutoPackBytes / small);
  auto rows_bound = PlanPacks(std::vector<MemberSpec>(300, Member(4)), 0, 1, listed);
  CHECK(rows_bound.size() == (300 + per_pack - 1) / per_pack);
  // ...and not beyond it: a keyed table costs a member nothing per row.
  CHECK(MemberPackBytes(Member(4), PackShape{9, 10'000'000}) < (uint64_t{1} << 20));
  // A member that alone exceeds the budget still trains, alone.
  MemberSpec huge;
  huge.layers = {{20000, Activation::kRelu, 0.0}, {20000, Activation::kRelu, 0.0}};
  CHECK(PlanPacks(std::vector<MemberSpec>(3, huge), 0, 1, shape).size() == 3);
}

TEST_CASE("pack_size caps packs and 1 turns packing off", "[pack]") {
  std::vector<MemberSpec> ms(70, Member(4));
  CHECK(PlanPacks(ms, 0).size() == 1);  // 70 is under the auto cap
  std::vector<MemberSpec> lots(kAutoPackMaxMembers * 2 + 1, Member(4));
  auto capped = PlanPacks(lots, 0);
  REQUIRE(capped.size() == 3);  // 342 + 342 + 341: no pack above the cap, sizes even
  CHECK(capped[0].size() == 342);
  CHECK(capped[2].size() == 341);
  CHECK(capped[1].front() == 342);
  auto off = PlanPacks(ms, 1);
  CHECK(off.size() == 70);
  auto five = PlanPacks(ms, 5);
  CHECK(five.size() == 14);
}

TEST_CASE("command members are never fused - each is a pack of one in index order", "[pack]") {
  std::vector<MemberSpec> ms = {Member(8), Member(8), Member(8), Member(8)};
  for (int i : {1, 2}) {
    ms[i].model.kind = ModelKind::kCommand;
    ms[i].model.argv = {"train"};  // the same program: still apart
  }
  auto packs = PlanPacks(ms, 0);
  REQUIRE(packs.size() == 3);
  CHECK(packs[0] == std::vector<int>{0, 3});
  CHECK(packs[1] == std::vector<int>{1});
  CHECK(packs[2] == std::vector<int>{2});
  CHECK(PlanPacks(ms, 4).size() == 3);
}

TEST_CASE("TorchScript members are never fused - each is a pack of one", "[pack]") {
  std::vector<MemberSpec> ms = {Member(8), Member(8), Member(8)};
  for (int i : {0, 2}) {
    ms[i].model.kind = ModelKind::kTorchscript;
    ms[i].model.path = "/m.pt";  // the same module: still apart
    ms[i].layers.clear();
  }
  auto packs = PlanPacks(ms, 0);
  REQUIRE(packs.size() == 3);
  CHECK(packs[0] == std::vector<int>{0});
  CHECK(packs[1] == std::vector<int>{1});
  CHECK(packs[2] == std::vector<int>{2});
}

TEST_CASE("on a GPU run a member the lane kernel does not train is a pack of one - lane members still pack", "[pack]") {
  // 9 features: 8 units fit the lanes; 600 units (6,000 weights) do not.
  std::vector<MemberSpec> ms = {Member(8), Member(600), Member(8), Member(600), Member(8)};
  PackShape cpu{9, 1000};
  PackShape gpu = cpu;
  gpu.gpu = true;
  CHECK(PlanPacks(ms, 0, 1, cpu) == std::vector<std::vector<int>>{{0, 2, 4}, {1, 3}});
  CHECK(PlanPacks(ms, 0, 1, gpu) == std::vector<std::vector<int>>{{0, 2, 4}, {1}, {3}});
  CHECK(PlanPacks(ms, 2, 1, gpu) == std::vector<std::vector<int>>{{0, 2}, {1}, {3}, {4}});
  // What the run is decides it too: a classifier's members, or several targets, never train in lanes.
  PackShape classes = gpu;
  classes.classes = 3;
  CHECK(PlanPacks(ms, 0, 1, classes).size() == 5);
  PackShape targets = gpu;
  targets.targets = 2;
  CHECK(PlanPacks(ms, 0, 1, targets).size() == 5);
  // Gaussian heads and adversarial training (with dropout too) are lane members.
  for (MemberSpec& m : ms) m.loss = LossKind::kGaussianNll, m.adversarial_eps = 0.01;
  ms[2].layers[0].dropout = 0.1;
  CHECK(PlanPacks(ms, 0, 1, gpu) == std::vector<std::vector<int>>{{0, 2, 4}, {1}, {3}});
  ms[4].model.kind = ModelKind::kTorchscript;  // never a lane member
  CHECK(PlanPacks(ms, 0, 1, gpu) == std::vector<std::vector<int>>{{0, 2}, {1}, {3}, {4}});
}

}  // namespace
}  // namespace ens
