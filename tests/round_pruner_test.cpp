// Tests of orchestrator/round_pruner: retention applied to a journaled run's rounds. Each
// lowered level is journaled before its files go; a crash between the two is finished by the
// next resume; a journal that cannot be written removes nothing; replay reads the levels back.
#include "orchestrator/run/round_pruner.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;
using ens::testing::WriteText;
namespace fs = std::filesystem;

// A state directory with `rounds` committed rounds of two members, every file there.
struct Run {
  TempDir tmp;
  RunLayout layout{tmp / "state"};
  std::unique_ptr<Journal> journal;
  RunProgress progress;

  explicit Run(int rounds) {
    fs::create_directories(layout.root());
    auto j = Journal::Open(layout.JournalFile());
    REQUIRE(j.ok());
    journal = std::move(*j);
    REQUIRE(Append(RunStartedRecord{}).ok());
    for (int r = 0; r < rounds; ++r) Commit();
  }
  template <typename R>
  Status Append(const R& rec) {
    nlohmann::json written;
    Status s = journal->Append(rec, &written);
    if (s.ok()) progress.Apply(written);
    return s;
  }
  void Commit() {
    const int r = progress.next_round;
    for (const char* m : {"m000", "m001"}) {
      MemberFiles f(layout.MemberDir(r, m));
      for (const std::string& p : {f.Member(), f.Metrics(), f.History(), f.HoldoutPred(), f.PoolPred(),
                                   f.Checkpoint(), f.Weights(), f.TrainState()})
        WriteText(p, "x");
    }
    RoundCommittedRecord c;
    c.round = r;
    REQUIRE(Append(c).ok());
  }
  bool Has(int round, std::string (MemberFiles::*file)() const) const {
    return fs::exists((MemberFiles(layout.MemberDir(round, "m000")).*file)()) &&
           fs::exists((MemberFiles(layout.MemberDir(round, "m001")).*file)());
  }
  bool Whole(int round) const {
    return Has(round, &MemberFiles::Checkpoint) && Has(round, &MemberFiles::Weights) && Has(round, &MemberFiles::PoolPred) &&
           Has(round, &MemberFiles::HoldoutPred) && Has(round, &MemberFiles::TrainState);
  }
  bool NoneOf(int round, std::string (MemberFiles::*file)() const) const {
    return !fs::exists((MemberFiles(layout.MemberDir(round, "m000")).*file)()) &&
           !fs::exists((MemberFiles(layout.MemberDir(round, "m001")).*file)());
  }
  bool RecordsOnly(int round) const {
    return NoneOf(round, &MemberFiles::Checkpoint) && NoneOf(round, &MemberFiles::Weights) &&
           NoneOf(round, &MemberFiles::PoolPred) &&
           NoneOf(round, &MemberFiles::HoldoutPred) && NoneOf(round, &MemberFiles::TrainState) &&
           Has(round, &MemberFiles::Metrics) && Has(round, &MemberFiles::History) && Has(round, &MemberFiles::Member);
  }
};

TEST_CASE("commit by commit, rounds outside the window keep their records and the last kept one's predecessor its train state", "[retention]") {
  Run run(1);
  const RetentionSpec spec{2, {}};
  for (int r = 1; r < 5; ++r) {
    auto out = PruneRounds(spec, run.layout, run.journal.get(), &run.progress, false);
    REQUIRE(out.ok());
    run.Commit();
  }
  // The commit of round 4 lowers round 1 to its records and round 2 to its train state.
  auto out = PruneRounds(spec, run.layout, run.journal.get(), &run.progress, false);
  REQUIRE(out.ok());
  CHECK(out->rounds_lowered == 2);
  // Round 1: train states; round 2: predictions, checkpoints (weights.bin and an old checkpoint.pt).
  CHECK(out->bytes_freed == 2 * 1 + 2 * 4);
  for (int r = 0; r < 2; ++r) CHECK(run.RecordsOnly(r));
  CHECK(run.NoneOf(2, &MemberFiles::Checkpoint));
  CHECK(run.NoneOf(2, &MemberFiles::Weights));
  CHECK(run.NoneOf(2, &MemberFiles::PoolPred));
  CHECK(run.NoneOf(2, &MemberFiles::HoldoutPred));
  CHECK(run.Has(2, &MemberFiles::TrainState));
  CHECK(run.Has(2, &MemberFiles::Metrics));
  CHECK(run.Whole(3));
  CHECK(run.Whole(4));

  // Replaying the journal gives the same levels.
  auto recs = ReadJournal(run.layout.JournalFile());
  REQUIRE(recs.ok());
  const RunProgress replayed = ReplayJournal(*recs);
  CHECK(replayed.round_files == run.progress.round_files);
  CHECK(replayed.round_files ==
        std::vector<RoundFiles>{RoundFiles::kRecords, RoundFiles::kRecords, RoundFiles::kTrainState, RoundFiles::kAll,
                                RoundFiles::kAll});
  // Nothing more is due until the next commit.
  out = PruneRounds(spec, run.layout, run.journal.get(), &run.progress, false);
  REQUIRE(out.ok());
  CHECK(out->rounds_lowered == 0);
}

TEST_CASE("a removal a crash cut short is finished when the run resumes", "[retention]") {
  Run run(4);
  // The journal says round 0 is down to its records, and round 1 to its train state; the
  // process died before removing anything.
  REQUIRE(run.Append(RoundPrunedRecord{0, RoundFiles::kRecords}).ok());
  REQUIRE(run.Append(RoundPrunedRecord{1, RoundFiles::kTrainState}).ok());
  CHECK(run.Whole(0));
  auto recs = ReadJournal(run.layout.JournalFile());
  REQUIRE(recs.ok());
  RunProgress resumed = ReplayJournal(*recs);
  REQUIRE(resumed.pruned_since_commit.size() == 2);
  const RetentionSpec spec{2, {}};
  // A commit's pass does not look back...
  auto out = PruneRounds(spec, run.layout, run.journal.get(), &resumed, false);
  REQUIRE(out.ok());
  CHECK(run.Whole(0));
  // ...a resume's does.
  out = PruneRounds(spec, run.layout, run.journal.get(), &resumed, true);
  REQUIRE(out.ok());
  CHECK(out->rounds_lowered == 0);
  CHECK(run.RecordsOnly(0));
  CHECK(run.Has(1, &MemberFiles::TrainState));
  CHECK(run.NoneOf(1, &MemberFiles::Checkpoint));
  CHECK(run.Whole(2));
  CHECK(run.Whole(3));
}

TEST_CASE("a journal that cannot record the pruning removes nothing and says so", "[retention]") {
  Run run(4);
  ::setenv("ENSEMBLED_TEST_FAIL_JOURNAL", "round_pruned", 1);
  auto out = PruneRounds(RetentionSpec{1, {}}, run.layout, run.journal.get(), &run.progress, false);
  ::unsetenv("ENSEMBLED_TEST_FAIL_JOURNAL");
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("retention: cannot journal the pruning of 3 round(s)") != std::string::npos);
  for (int r = 0; r < 4; ++r) CHECK(run.Whole(r));
  CHECK(run.progress.round_files == std::vector<RoundFiles>(4, RoundFiles::kAll));
  // The next commit's pass tries again.
  out = PruneRounds(RetentionSpec{1, {}}, run.layout, run.journal.get(), &run.progress, false);
  REQUIRE(out.ok());
  CHECK(out->rounds_lowered == 3);
  CHECK(run.RecordsOnly(0));
  CHECK(run.RecordsOnly(1));
  CHECK(run.Has(2, &MemberFiles::TrainState));
  CHECK(run.Whole(3));
}

TEST_CASE("pinned rounds keep every file, keep_rounds 0 prunes nothing", "[retention]") {
  Run run(6);
  auto out = PruneRounds(RetentionSpec{0, {}}, run.layout, run.journal.get(), &run.progress, false);
  REQUIRE(out.ok());
  CHECK(out->rounds_lowered == 0);
  out = PruneRounds(RetentionSpec{1, {2}}, run.layout, run.journal.get(), &run.progress, false);
  REQUIRE(out.ok());
  CHECK(run.RecordsOnly(0));
  CHECK(run.Has(1, &MemberFiles::TrainState));
  CHECK(run.NoneOf(1, &MemberFiles::PoolPred));
  CHECK(run.Whole(2));
  CHECK(run.RecordsOnly(3));
  CHECK(run.Has(4, &MemberFiles::TrainState));
  CHECK(run.Whole(5));
}

TEST_CASE("a round_pruned record that names no committed round or no level is ignored by replay", "[retention]") {
  RunProgress p;
  p.Apply({{"event", "run_started"}});
  p.Apply({{"event", "round_committed"}, {"round", 0}});
  p.Apply({{"event", "round_pruned"}, {"round", 5}, {"files", "records"}});
  p.Apply({{"event", "round_pruned"}, {"round", 0}, {"files", "everything"}});
  p.Apply({{"event", "round_pruned"}, {"round", -1}, {"files", "records"}});
  CHECK(p.round_files == std::vector<RoundFiles>{RoundFiles::kAll});
  CHECK(p.pruned_since_commit.empty());
  p.Apply({{"event", "round_pruned"}, {"round", 0}, {"files", "records"}});
  p.Apply({{"event", "round_pruned"}, {"round", 0}, {"files", "train_state"}});  // never back up
  CHECK(p.round_files == std::vector<RoundFiles>{RoundFiles::kRecords});
}

}  // namespace
}  // namespace ens
