#include "orchestrator/pack_plan.h"

#include <catch2/catch.hpp>

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
}

TEST_CASE("auto spreads a small group over the workers - the cap still holds", "[pack]") {
  std::vector<MemberSpec> ms(8, Member(4));
  auto two = PlanPacks(ms, 0, 2);
  REQUIRE(two.size() == 2);
  CHECK(two[0] == std::vector<int>{0, 1, 2, 3});
  CHECK(two[1] == std::vector<int>{4, 5, 6, 7});
  CHECK(PlanPacks(ms, 0, 16).size() == 8);  // never an empty pack
  CHECK(PlanPacks(ms, 0, 1).size() == 1);
  std::vector<MemberSpec> many(100, Member(4));
  auto spread = PlanPacks(many, 0, 2);
  REQUIRE(spread.size() == 4);  // ceil(100 / 32)
  for (const auto& p : spread) CHECK(p.size() == 25);
  CHECK(PlanPacks(ms, 3, 4).size() == 3);  // an explicit size ignores the worker count
}

TEST_CASE("pack_size caps packs and 1 turns packing off", "[pack]") {
  std::vector<MemberSpec> ms(70, Member(4));
  auto capped = PlanPacks(ms, 0);
  REQUIRE(capped.size() == 3);  // 24 + 23 + 23: no pack above the cap, sizes even
  CHECK(capped[0].size() == 24);
  CHECK(capped[2].size() == 23);
  CHECK(capped[1].front() == 24);
  auto off = PlanPacks(ms, 1);
  CHECK(off.size() == 70);
  auto five = PlanPacks(ms, 5);
  CHECK(five.size() == 14);
}

}  // namespace
}  // namespace ens
