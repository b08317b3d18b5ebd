// Torn writes, in process (tests/fakes/fake_disk.h: an Env in which the process "dies" at a
// chosen call: a write stores half its bytes and nothing after it reaches the disk). Each test
// kills the writer at every call of one durable write in turn, then reads back with the real
// OS, as the restarted process would: the journal's torn-tail rule drops a partial record and
// the journal takes appends after it; an atomic file is its old content or its new one; a
// republished pack serves its old member or its new one, whole.
#include <catch2/catch.hpp>

#include <string>

#include "common/base/atomic_file.h"
#include "common/base/env.h"
#include "common/state/journal.h"
#include "common/state/pack_results.h"
#include "fakes/fake_disk.h"
#include "support/one_member_pack.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

using ens::testing::FakeDisk;
using ens::testing::TempDir;

TEST_CASE("a journal append torn at each of its calls reopens to its whole records and takes appends after", "[torn_write][env]") {
  bool saw_torn = false, saw_kept = false;
  for (int die_at = 0;; ++die_at) {
    INFO("dies at mutating call " << die_at);
    TempDir dir;
    const std::string path = dir.File("journal.jsonl");
    {
      auto j = Journal::Open(path);
      REQUIRE(j.ok());
      REQUIRE((*j)->Append(RunStartedRecord{"fp", 3, 10, 5, 5}).ok());
      REQUIRE((*j)->Append(RunExtendedRecord{2, 4}).ok());
      FakeDisk disk;
      ScopedEnv installed(&disk);
      disk.DieAtCall(die_at);
      Status s = (*j)->Append(MemberFailedRecord{0, "m0", 0, 1, std::string(200, 'e'), true});
      if (!disk.dead()) {  // past its last call: the append finished
        REQUIRE(s.ok());
        break;
      }
      CHECK_FALSE(s.ok());
    }
    auto reopened = Journal::Open(path);  // the restarted process, on the real OS
    REQUIRE(reopened.ok());
    const size_t kept = (*reopened)->records().size();
    CHECK((kept == 2 || kept == 3));
    CHECK((*reopened)->records()[1]["event"] == "run_extended");
    if ((*reopened)->torn_lines_dropped() == 1) {
      saw_torn = true;
      CHECK(kept == 2);
    }
    saw_kept |= kept == 3;
    REQUIRE((*reopened)->Append(RunFinishedRecord{1, "done"}).ok());
    auto read = ReadJournal(path);
    REQUIRE(read.ok());  // the torn line is gone, not in the middle of the file
    CHECK(read->size() == kept + 1);
    CHECK(read->back()["event"] == "run_finished");
  }
  CHECK(saw_torn);  // the death in the write itself
  CHECK(saw_kept);  // the death at its fdatasync: the line is whole (a process death, not a power loss)
}

TEST_CASE("an atomic write torn at each of its calls leaves the old content or the new, never a part", "[torn_write][env]") {
  const std::string old_content(5000, 'o'), new_content(9000, 'n');
  bool saw_old = false, saw_new = false;
  for (int die_at = 0;; ++die_at) {
    INFO("dies at mutating call " << die_at);
    TempDir dir;
    const std::string path = dir.File("member.json");
    REQUIRE(WriteFileAtomic(path, old_content).ok());
    {
      FakeDisk disk;
      ScopedEnv installed(&disk);
      disk.DieAtCall(die_at);
      Status s = WriteFileAtomic(path, new_content);
      if (!disk.dead()) {
        REQUIRE(s.ok());
        CHECK(*ReadFile(path) == new_content);
        break;
      }
      CHECK_FALSE(s.ok());
    }
    const std::string now = *ReadFile(path);
    CHECK((now == old_content || now == new_content));
    saw_old |= now == old_content;
    saw_new |= now == new_content;
    REQUIRE(WriteFileAtomic(path, "again").ok());  // a leftover temporary is no obstacle
    CHECK(*ReadFile(path) == "again");
  }
  CHECK(saw_old);
  CHECK(saw_new);  // the death at the directory's fsync, after the rename
}


TEST_CASE("a pack republished and torn at each of its calls serves its old member or its new one, whole", "[torn_write][env]") {
  const std::string old_weights(3000, 'o'), new_weights(6000, 'n');
  bool saw_old = false, saw_new = false;
  for (int die_at = 0;; ++die_at) {
    INFO("dies at mutating call " << die_at);
    TempDir dir;
    const std::string pack = dir.File("r0000-m0-a1");
    REQUIRE(PublishOneMemberPack(pack, old_weights).ok());
    bool finished = false;
    {
      FakeDisk disk;
      ScopedEnv installed(&disk);
      disk.DieAtCall(die_at);
      Status s = PublishOneMemberPack(pack, new_weights);
      finished = !disk.dead();
      if (finished) REQUIRE(s.ok());
    }
    const std::string weights = PublishedWeights(pack);
    CHECK((weights == old_weights || weights == new_weights));
    saw_old |= weights == old_weights;
    saw_new |= weights == new_weights;
    if (finished) {
      CHECK(weights == new_weights);
      break;
    }
    REQUIRE(PublishOneMemberPack(pack, new_weights).ok());  // the next attempt, after the restart
  }
  CHECK(saw_old);
  CHECK(saw_new);
}

}  // namespace
}  // namespace ens
