// Checkpoints without a module per member (worker/predict/checkpoint.h, common/state/member_weights.h): the
// worker saves an MLP member as its weights file, builds no module for it, and the module
// LoadMember builds from that file when asked is the one the member's parts make (the module
// every checkpoint.pt held before), buffer for buffer and in every prediction bit; a member
// module file (the earlier layout) and a member directory of either layout load too.
#include "support/trainer_fixture.h"

#include "common/base/atomic_file.h"
#include "common/state/member_weights.h"
#include "common/state/run_layout.h"

namespace ens {
namespace {

using namespace ens::testing;

// Member `index`'s predictions on the fixture's holdout through `module` (the worker's blocks).
std::vector<float> HoldoutThrough(Fixture& f, torch::jit::Module& module) {
  torch::Tensor table = torch::from_blob(f.holdout.data(), {200, kFeatures + 1});
  return PredictRows(module, table.narrow(1, 0, kFeatures));
}

// The same member: its buffers bit for bit (trainer_fixture.h) and its spec.
void RequireSameMember(const torch::jit::Module& a, const torch::jit::Module& b) {
  RequireSameBuffers(a, b);
  CHECK(a.attr("spec").toStringRef() == b.attr("spec").toStringRef());
}

TEST_CASE("an MLP member is saved as its weights and its module is built when it is loaded", "[trainer][checkpoint]") {
  Fixture f;
  auto out = f.Train({0, 1, 2}, Seed000, "pack");
  for (int i : {0, 1, 2}) {
    INFO("member " << i);
    REQUIRE(out[i].status.ok());
    const std::string path = f.dir.File("pack-" + Seed000(i).name + ".pt");
    auto bytes = ReadFile(path);
    REQUIRE(bytes.ok());
    CHECK(LooksLikeMemberWeights(*bytes));  // no TorchScript archive was written
    auto module = LoadMember(path);
    INFO(module.status().ToString());
    REQUIRE(module.ok());
    // The module built now predicts the bits the worker recorded (eagerly, at training).
    const std::vector<float> p = HoldoutThrough(f, *module);
    REQUIRE(p.size() == out[i].holdout_pred.size());
    CHECK(std::memcmp(p.data(), out[i].holdout_pred.data(), p.size() * sizeof(float)) == 0);
    CHECK(module->find_method("forward_block").has_value());
  }
}

TEST_CASE("a member module saved from a weights file loads as the same member, as checkpoint.pt did",
          "[trainer][checkpoint]") {
  Fixture f;
  auto out = f.Train({0}, Seed000, "alone");
  REQUIRE(out[0].status.ok());
  auto lazy = LoadMember(f.dir.File("alone-m000.pt"));
  REQUIRE(lazy.ok());
  // The earlier layout: the member's module itself, written as the worker wrote checkpoint.pt.
  REQUIRE(SaveModule(*lazy, f.dir.File("module.pt")).ok());
  auto bytes = ReadFile(f.dir.File("module.pt"));
  REQUIRE(bytes.ok());
  CHECK_FALSE(LooksLikeMemberWeights(*bytes));
  auto saved = LoadMember(f.dir.File("module.pt"));
  REQUIRE(saved.ok());
  RequireSameMember(*lazy, *saved);
  const std::vector<float> a = HoldoutThrough(f, *lazy), b = HoldoutThrough(f, *saved);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST_CASE("a member directory loads its weights file, else its checkpoint.pt", "[trainer][checkpoint]") {
  Fixture f;
  auto out = f.Train({0}, Seed000, "t");
  REQUIRE(out[0].status.ok());
  auto lazy = LoadMember(f.dir.File("t-m000.pt"));
  REQUIRE(lazy.ok());
  // An old member directory: checkpoint.pt only.
  const MemberFiles old_dir(f.dir.File("old"));
  REQUIRE(MakeDirs(old_dir.dir()).ok());
  REQUIRE(SaveModule(*lazy, old_dir.Checkpoint()).ok());
  CHECK(old_dir.StoredCheckpoint() == old_dir.Checkpoint());
  auto from_old = LoadMember(old_dir.dir());
  REQUIRE(from_old.ok());
  RequireSameMember(*lazy, *from_old);
  // A new one: weights.bin, preferred over a checkpoint.pt beside it.
  const MemberFiles new_dir(f.dir.File("new"));
  REQUIRE(MakeDirs(new_dir.dir()).ok());
  REQUIRE(WriteFileDurable(new_dir.Weights(), *ReadFile(f.dir.File("t-m000.pt"))).ok());
  REQUIRE(WriteFileDurable(new_dir.Checkpoint(), "not a module").ok());
  CHECK(new_dir.StoredCheckpoint() == new_dir.Weights());
  auto from_new = LoadMember(new_dir.dir());
  INFO(from_new.status().ToString());
  REQUIRE(from_new.ok());
  RequireSameMember(*lazy, *from_new);
}

TEST_CASE("a weights file cut short or damaged is refused naming it", "[trainer][checkpoint]") {
  Fixture f;
  auto out = f.Train({0}, Seed000, "t");
  REQUIRE(out[0].status.ok());
  const std::string whole = *ReadFile(f.dir.File("t-m000.pt"));
  for (size_t cut : {whole.size() - 1, whole.size() / 2, size_t{12}}) {
    INFO("cut at " << cut);
    REQUIRE(WriteFileDurable(f.dir.File("cut.bin"), whole.substr(0, cut)).ok());
    auto m = LoadMember(f.dir.File("cut.bin"));
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == Status::Code::kCorruption);
    CHECK(m.status().message().find("cut.bin") != std::string::npos);
  }
}

}  // namespace
}  // namespace ens
