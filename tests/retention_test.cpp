// Tests of common/retention: which rounds keep which files for a keep_rounds window and pins,
// that levels only go down, and what removing a level deletes (and keeps) in a member folder.
#include "common/state/retention.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "common/state/run_layout.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;
using ens::testing::WriteText;
using F = RoundFiles;

std::vector<F> Wanted(const RetentionSpec& spec, int last) {
  std::vector<F> out;
  for (int r = 0; r <= last; ++r) out.push_back(WantedFiles(spec, r, last));
  return out;
}

TEST_CASE("keep_rounds 0 keeps every file of every round and prunes nothing", "[retention]") {
  RetentionSpec spec;
  CHECK(spec.KeepsEverything());
  CHECK(Wanted(spec, 4) == std::vector<F>(5, F::kAll));
  CHECK(PrunesDue(spec, std::vector<F>(5, F::kAll)).empty());
}

TEST_CASE("the last keep_rounds rounds keep everything, the round before them its train state", "[retention]") {
  RetentionSpec spec{2, {}};
  CHECK(Wanted(spec, 0) == std::vector<F>{F::kAll});
  CHECK(Wanted(spec, 1) == std::vector<F>{F::kAll, F::kAll});
  CHECK(Wanted(spec, 2) == std::vector<F>{F::kTrainState, F::kAll, F::kAll});
  CHECK(Wanted(spec, 5) == std::vector<F>{F::kRecords, F::kRecords, F::kRecords, F::kTrainState, F::kAll, F::kAll});
  spec.keep_rounds = 1;  // the last committed round is always whole
  CHECK(Wanted(spec, 3) == std::vector<F>{F::kRecords, F::kRecords, F::kTrainState, F::kAll});
}

TEST_CASE("a pinned round keeps everything and its predecessor its train state", "[retention]") {
  RetentionSpec spec{1, {0, 3}};
  CHECK(Wanted(spec, 6) ==
        std::vector<F>{F::kAll, F::kRecords, F::kTrainState, F::kAll, F::kRecords, F::kTrainState, F::kAll});
}

TEST_CASE("PrunesDue lowers only rounds that hold more than wanted, in round order, never raising one", "[retention]") {
  RetentionSpec spec{2, {}};
  // Rounds 0-3 as an earlier commit left them; round 4 just committed.
  std::vector<F> now = {F::kRecords, F::kTrainState, F::kAll, F::kAll, F::kAll};
  auto due = PrunesDue(spec, now);
  REQUIRE(due.size() == 2);
  CHECK(due[0].round == 1);
  CHECK(due[0].to == F::kRecords);
  CHECK(due[1].round == 2);
  CHECK(due[1].to == F::kTrainState);
  now = {F::kRecords, F::kRecords, F::kTrainState, F::kAll, F::kAll};
  CHECK(PrunesDue(spec, now).empty());
  // Pinning round 1 after its files are gone brings nothing back, and lowers nothing else.
  spec.pin = {1};
  now = {F::kRecords, F::kRecords, F::kRecords, F::kTrainState, F::kAll, F::kAll};
  CHECK(PrunesDue(spec, now).empty());
}

TEST_CASE("a level's name reads back, and an unknown name does not", "[retention]") {
  for (F f : {F::kAll, F::kTrainState, F::kRecords}) {
    F back = F::kAll;
    REQUIRE(ParseRoundFiles(Name(f), &back));
    CHECK(back == f);
  }
  F x = F::kRecords;
  CHECK_FALSE(ParseRoundFiles("everything", &x));
  CHECK(x == F::kRecords);
}

void Fill(const std::string& dir, bool command_member) {
  std::filesystem::create_directories(dir);
  MemberFiles f(dir);
  WriteText(f.Member(), "{}");
  WriteText(f.Metrics(), "{}");
  WriteText(f.History(), "{}\n");
  WriteText(f.HoldoutPred(), std::string(400, 'h'));
  WriteText(f.PoolPred(), std::string(1000, 'p'));
  WriteText(f.TrainState(), std::string(300, 's'));
  if (command_member) {
    std::filesystem::create_directories(f.CommandModel() + "/sub");
    WriteText(f.CommandModel() + "/sub/weights.bin", std::string(50, 'w'));
  } else {
    WriteText(f.Weights(), std::string(150, 'c'));    // a member saved as its weights
    WriteText(f.Checkpoint(), std::string(50, 'c'));  // and one of an earlier layout's module
  }
}

TEST_CASE("removing a round's files keeps its records, and train_state.pt until the records level", "[retention]") {
  TempDir tmp;
  const std::string a = tmp / "m000", b = tmp / "m001";
  Fill(a, false);
  Fill(b, true);
  const uint64_t before = DirectoryBytes(tmp.path());
  std::vector<std::string> problems;
  CHECK(RemoveRoundFiles(F::kAll, {a, b}, &problems) == 0);
  CHECK(DirectoryBytes(tmp.path()) == before);

  CHECK(RemoveRoundFiles(F::kTrainState, {a, b}, &problems) == (400 + 1000 + 200) + (400 + 1000 + 50));
  CHECK(problems.empty());
  for (const std::string& d : {a, b}) {
    MemberFiles f(d);
    CHECK_FALSE(std::filesystem::exists(f.HoldoutPred()));
    CHECK_FALSE(std::filesystem::exists(f.PoolPred()));
    CHECK_FALSE(std::filesystem::exists(f.Checkpoint()));
    CHECK_FALSE(std::filesystem::exists(f.Weights()));
    CHECK_FALSE(std::filesystem::exists(f.CommandModel()));
    CHECK(std::filesystem::exists(f.TrainState()));
    CHECK(std::filesystem::exists(f.Member()));
    CHECK(std::filesystem::exists(f.Metrics()));
    CHECK(std::filesystem::exists(f.History()));
  }
  CHECK(DirectoryBytes(tmp.path()) == before - 3050);

  // Again, then to the records: what is gone already is no error.
  CHECK(RemoveRoundFiles(F::kTrainState, {a, b}, &problems) == 0);
  CHECK(RemoveRoundFiles(F::kRecords, {a, b}, &problems) == 600);
  CHECK(problems.empty());
  CHECK_FALSE(std::filesystem::exists(MemberFiles(a).TrainState()));
  CHECK(std::filesystem::exists(MemberFiles(a).History()));
  CHECK(DirectoryBytes(tmp.path()) == before - 3650);
  CHECK(DirectoryBytes(tmp / "absent") == 0);
}

}  // namespace
}  // namespace ens
