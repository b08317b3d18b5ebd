// A full disk, in process and without root (tests/fakes/fake_disk.h: an Env whose writes stop
// at a byte budget with ENOSPC). The journal, an atomic file and a pack's member directory
// each fail with an I/O error naming the file, leave nothing a reader would take for a record,
// a file or a member, and once the disk has room again the same state takes the same write.
// (disk_full_test.cpp is the whole run on a real full tmpfs, as root.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

using json = nlohmann::json;
using ens::testing::FakeDisk;
using ens::testing::TempDir;

bool SaysDiskFull(const Status& s, const std::string& what) {
  return s.code() == Status::Code::kIOError && s.message().find(what) != std::string::npos &&
         s.message().find("No space left on device") != std::string::npos;
}

TEST_CASE("a full disk fails a journal append naming the journal, keeps whole records only, and the append goes through once there is room", "[disk_full][env]") {
  TempDir dir;
  const std::string path = dir.File("journal.jsonl");
  FakeDisk disk;
  ScopedEnv installed(&disk);
  auto j = Journal::Open(path);
  REQUIRE(j.ok());
  REQUIRE((*j)->Append(RunStartedRecord{"fp", 3, 10, 5, 5}).ok());
  REQUIRE((*j)->Append(RunExtendedRecord{2, 4}).ok());
  const std::string whole = *ReadFile(path);

  disk.SetFreeBytes(30);  // part of the next line fits, then the disk is full
  const std::vector<json> batch = {ToRecord(MemberFailedRecord{0, "m0", 0, 1, "x", true}),
                                   ToRecord(RunFinishedRecord{1, "done"})};
  Status s = (*j)->AppendBatch(batch);
  INFO(s.message());
  CHECK(SaysDiskFull(s, path));
  CHECK(*ReadFile(path) == whole);  // the 30 bytes that fitted are cut away
  CHECK(SaysDiskFull((*j)->AppendBatch(batch), path));  // still full
  CHECK(*ReadFile(path) == whole);

  disk.SetUnlimited();
  REQUIRE((*j)->AppendBatch(batch).ok());
  auto read = ReadJournal(path);
  REQUIRE(read.ok());
  REQUIRE(read->size() == 4);
  CHECK((*read)[2]["event"] == "member_failed");
  CHECK((*read)[3]["event"] == "run_finished");
  j->reset();
  auto reopened = Journal::Open(path);
  REQUIRE(reopened.ok());
  CHECK((*reopened)->records().size() == 4);
  CHECK((*reopened)->torn_lines_dropped() == 0);
}

TEST_CASE("a full disk fails an atomic write naming its file, leaves the old content and no temporary, and the write goes through once there is room", "[disk_full][env]") {
  TempDir dir;
  const std::string path = dir.File("status.json");
  FakeDisk disk;
  ScopedEnv installed(&disk);
  REQUIRE(WriteFileAtomic(path, "old").ok());
  const std::string big(8192, 'n');

  disk.SetFreeBytes(1000);
  Status s = WriteFileAtomic(path, big);
  INFO(s.message());
  CHECK(SaysDiskFull(s, path + ".tmp"));
  CHECK(*ReadFile(path) == "old");
  CHECK_FALSE(PathExists(path + ".tmp"));
  CHECK(SaysDiskFull(WriteFileAtomic(path, big), path + ".tmp"));  // full: the create stores nothing
  CHECK(*ReadFile(path) == "old");
  CHECK_FALSE(PathExists(path + ".tmp"));

  disk.SetUnlimited();
  REQUIRE(WriteFileAtomic(path, big).ok());
  CHECK(*ReadFile(path) == big);
}



TEST_CASE("a full disk fails a pack's member files naming the file, publishes no member, and the pack publishes once there is room", "[disk_full][env]") {
  TempDir dir;
  const std::string rounds = dir.File("rounds/r0000/packs");
  REQUIRE(MakeDirs(rounds).ok());
  const std::string pack = rounds + "/r0000-m0-a1";
  const std::string weights(64 * 1024, 'w');
  FakeDisk disk;
  ScopedEnv installed(&disk);

  disk.SetFreeBytes(10000);
  Status s = PublishOneMemberPack(pack, weights);
  INFO(s.message());
  CHECK(SaysDiskFull(s, pack + ".tmp/weights.bin"));
  CHECK_FALSE(PathExists(pack));  // a pack directory that exists is complete: none does
  CHECK_FALSE(ReadPackRecords(pack).ok());

  disk.SetFreeBytes(0);  // not even the directory
  s = PublishOneMemberPack(pack + "-2", weights);
  CHECK(SaysDiskFull(s, pack + "-2.tmp"));
  CHECK_FALSE(PathExists(pack + "-2"));

  disk.SetUnlimited();
  REQUIRE(PublishOneMemberPack(pack, weights).ok());  // the leftover .tmp of the failed attempt is no obstacle
  CHECK(PublishedWeights(pack) == weights);
  CHECK_FALSE(PathExists(pack + ".tmp"));

  // A pack published again on a full disk: the one published before stays whole.
  disk.SetFreeBytes(10000);
  CHECK_FALSE(PublishOneMemberPack(pack, std::string(64 * 1024, 'v')).ok());
  CHECK(PublishedWeights(pack) == weights);
}

}  // namespace
}  // namespace ens
