// Warm start in-process (trainer.h): a member continues from its previous round's train state
// (weights, optimizer moments and step count) with warm_start_epochs as its budget, gets the
// same bits alone and in a pack with cold mates, and starts cold, saying why, when its
// architecture changed or there is no state.
#include "support/trainer_fixture.h"

#include "common/base/atomic_file.h"

namespace ens {
namespace {

using namespace ens::testing;

// The seed-000 shape (9 -> 6 sigmoid -> 1, batch 32), whose CPU matrix kernels are the same
// alone and packed (docs/internals.md, "Reproducibility across packs"); dropout on member 1.
MemberSpec Warm(int index) {
  MemberSpec m;
  m.name = "w" + std::to_string(1000 + index).substr(1);
  m.layers = {{6, Activation::kSigmoid, index == 1 ? 0.1 : 0.0}};
  m.lr = 3e-3;
  m.epochs = 12;
  m.warm_start = true;
  m.warm_start_epochs = 3;
  m.early_stopping.enabled = index == 2;
  m.early_stopping.patience = 1;
  return m;
}

// Round 0 of members `indices` (cold), their train states written as files; then round 1 of
// the same members from those states, as one pack. Outputs of round 1 by index.
struct TwoRounds {
  Fixture f;
  std::map<int, TrainOutputs> round0;

  void RunRound0(const std::vector<int>& indices) {
    round0 = f.Train(indices, Warm, "r0");
    for (int i : indices) {
      INFO(round0[i].status.ToString());
      REQUIRE(round0[i].status.ok());
      REQUIRE_FALSE(round0[i].train_state.empty());
      REQUIRE(WriteFileUnsynced(f.dir.File("state-" + std::to_string(i) + ".pt"), round0[i].train_state).ok());
    }
  }

  std::map<int, TrainOutputs> Round1(const std::vector<int>& indices, const std::string& tag,
                                     MemberSpec (*make)(int) = Warm) {
    return f.Train(indices, make, tag, [this](TaskSpec& t) {
      t.round = 1;
      t.seed = MemberSeed(7, t.member_index, 1);
      t.task_id = "r1-" + t.member.name;
      t.warm_from = t.member.warm_start ? f.dir.File("state-" + std::to_string(t.member_index) + ".pt") : "";
    });
  }
};

TEST_CASE("a warm-started member continues from its previous round with its own epoch budget", "[trainer][warm]") {
  TwoRounds two;
  two.RunRound0({0});
  CHECK(two.round0[0].metrics["warm_start"] == "cold: round 0, or no state of the round before");
  auto state = LoadTrainState(two.f.dir.File("state-0.pt"));
  REQUIRE(state.ok());
  CHECK(state->params.size() == 4);  // two layers' weights and biases
  CHECK(state->m.size() == 4);
  CHECK(state->v.size() == 4);
  CHECK(state->step == two.round0[0].metrics["stop_step"].get<int64_t>());
  // Its weights are the checkpoint's.
  auto member = LoadMember(two.f.dir.File("r0-w000.pt"));
  REQUIRE(member.ok());
  CHECK(torch::equal(state->params[0], member->attr("layer0_weight").toTensor()));
  CHECK(torch::equal(state->params[1].reshape({-1}), member->attr("layer0_bias").toTensor()));

  auto r1 = two.Round1({0}, "a");
  INFO(r1[0].status.ToString());
  REQUIRE(r1[0].status.ok());
  CHECK(r1[0].metrics["warm_start"] == "warm");
  CHECK(r1[0].metrics["epochs_run"] == 3);  // warm_start_epochs, not epochs
  // It starts where round 0 ended: its first epoch's training loss is about round 0's last,
  // far below what the same member of round 1 started cold reaches in its first epoch.
  auto cold = two.Round1({0}, "cold", [](int i) {
    MemberSpec m = Warm(i);
    m.warm_start = false;
    return m;
  });
  REQUIRE(cold[0].status.ok());
  const double last0 = two.round0[0].history.back()["loss"], warm1 = r1[0].history.front()["loss"];
  const double cold1 = cold[0].history.front()["loss"];
  INFO("round 0 last " << last0 << ", round 1 first: warm " << warm1 << ", cold " << cold1);
  CHECK(warm1 < 0.8 * cold1);
  CHECK(warm1 < 1.1 * last0);
  // Its own state for round 2 counts every step it has taken.
  REQUIRE(WriteFileUnsynced(two.f.dir.File("next.pt"), r1[0].train_state).ok());
  auto next = LoadTrainState(two.f.dir.File("next.pt"));
  REQUIRE(next.ok());
  CHECK(next->step == state->step + r1[0].metrics["stop_step"].get<int64_t>());
}

TEST_CASE("a warm-started member has the same bits alone and in a pack with cold and warm mates", "[trainer][warm]") {
  TwoRounds two;
  two.RunRound0({0, 1, 2, 3});
  auto alone = two.Round1({1}, "alone");
  auto again = two.Round1({1}, "again");
  auto pack = two.Round1({0, 1, 2, 3}, "pack");
  {
    INFO("alone, twice");
    RequireSameBits(two.f, alone[1], again[1], "alone-w001.pt", "again-w001.pt");
  }
  {
    INFO("alone and in a pack");
    RequireSameBits(two.f, alone[1], pack[1], "alone-w001.pt", "pack-w001.pt");
  }
  CHECK(alone[1].train_state == pack[1].train_state);
  // A cold member (no warm_start) in a pack beside warm ones equals itself alone.
  auto cold = [](int i) {
    MemberSpec m = Warm(i);
    m.warm_start = false;
    return m;
  };
  auto cold_three = [](int i) {
    MemberSpec m = Warm(i);
    m.warm_start = i != 3;
    return m;
  };
  auto cold_alone = two.Round1({3}, "cold", cold);
  auto mixed = two.Round1({0, 1, 3}, "mixed", cold_three);
  {
    INFO("cold, alone and beside warm mates");
    RequireSameBits(two.f, cold_alone[3], mixed[3], "cold-w003.pt", "mixed-w003.pt");
  }
  CHECK(cold_alone[3].train_state.empty());
}

TEST_CASE("a member whose architecture changed since its last round starts cold and says why", "[trainer][warm]") {
  TwoRounds two;
  two.RunRound0({0});
  auto wider = [](int i) {
    MemberSpec m = Warm(i);
    m.layers[0].units = 8;
    return m;
  };
  auto r1 = two.Round1({0}, "wide", wider);
  REQUIRE(r1[0].status.ok());
  CHECK(r1[0].metrics["warm_start"] == "cold: the architecture changed (parameter shapes)");
  CHECK(r1[0].metrics["epochs_run"] == 12);

  // A state file that is not one fails the member, naming the file.
  REQUIRE(WriteFileUnsynced(two.f.dir.File("state-0.pt"), "garbage").ok());
  auto bad = two.Round1({0}, "bad");
  CHECK_FALSE(bad[0].status.ok());
  CHECK(bad[0].permanent_failure);
  CHECK(bad[0].status.message().find(two.f.dir.File("state-0.pt") + ": not a train state") != std::string::npos);
}

}  // namespace
}  // namespace ens
