#include "orchestrator/pack_plan.h"

#include <catch2/catch.hpp>

namespace ens {
namespace {

MemberSpec Member(int units, const std::string& optimizer = "adam") {
  MemberSpec m;
  m.layers = {{units, "relu", 0.0}};
  m.optimizer = optimizer;
  return m;
}

TEST_CASE("compatible members pack together in index order - others apart", "[pack]") {
  std::vector<MemberSpec> ms = {Member(8), Member(16), Member(8), Member(16), Member(8, "sgd")};
  auto packs = PlanPacks(ms, 0);
  REQUIRE(packs.size() == 3);
  CHECK(packs[0] == std::vector<int>{0, 2});
  CHECK(packs[1] == std::vector<int>{1, 3});
  CHECK(packs[2] == std::vector<int>{4});
}

TEST_CASE("seed, initializer, split and early stopping do not split a pack - lr does", "[pack]") {
  MemberSpec a = Member(8), b = Member(8), c = Member(8);
  b.seed_offset = 7;
  b.initializer = "he_uniform";
  b.split = "bootstrap";
  b.early_stopping.enabled = true;
  c.lr = 0.01;
  CHECK(PackKey(a) == PackKey(b));
  CHECK(PackKey(a) != PackKey(c));
}

TEST_CASE("pack_size caps packs and 1 turns packing off", "[pack]") {
  std::vector<MemberSpec> ms(70, Member(4));
  auto capped = PlanPacks(ms, 0);
  REQUIRE(capped.size() == 3);  // 32 + 32 + 6
  CHECK(capped[0].size() == static_cast<size_t>(kAutoPackCap));
  CHECK(capped[2].size() == 6);
  CHECK(capped[1].front() == 32);
  auto off = PlanPacks(ms, 1);
  CHECK(off.size() == 70);
  auto five = PlanPacks(ms, 5);
  CHECK(five.size() == 14);
}

}  // namespace
}  // namespace ens
