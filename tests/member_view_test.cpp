// MemberView over PackResults: a packed member's files read back by their member-directory
// paths exactly as its own directory would hold them; the member's own directory first; a
// member published twice served from its latest publication; a damaged pack an error naming it.
#include "common/state/member_view.h"

#include <catch2/catch.hpp>

#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/base/atomic_file.h"
#include "common/state/member_result.h"
#include "common/state/pack_results.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;
using json = nlohmann::json;

std::string Floats(std::initializer_list<float> v) { return FloatsToBytes(std::vector<float>(v)); }

// Publishes a pack holding `members` (name -> a tag that makes its bytes its own).
void PublishPack(const std::string& round_dir, const std::string& pack, const std::vector<std::pair<std::string, float>>& members) {
  PackResultsWriter w(round_dir + "/packs/" + pack);
  REQUIRE(w.Begin().ok());
  for (const auto& [name, tag] : members) {
    const std::string weights = "weights of " + name, history = "{\"epoch\":1}\n{\"epoch\":2}\n";
    const std::string holdout = Floats({tag, tag + 1}), pool = Floats({tag, tag + 1, tag + 2});
    REQUIRE(w.AddFiles(name, {{"weights.bin", weights}, {"history.jsonl", history},
                              {"holdout_pred.f32", holdout}, {"pool_pred.f32", pool}}).ok());
    w.SetRecord(name, {{"seed", 7}, {"pack", {{"position", 0}}}});
    w.SetMetrics(name, {{"member", name}, {"holdout_rmse", tag}, {"pack", pack}});
  }
  REQUIRE(w.Finish().ok());
  REQUIRE(w.Publish().ok());
}

TEST_CASE("a packed member's files read back as its own directory would hold them") {
  TempDir d;
  const std::string round = d.path() + "/rounds/r0001";
  PublishPack(round, "r1-m000-a1", {{"m000", 10.f}, {"m001", 20.f}, {"m002", 30.f}});
  const std::string m1 = round + "/members/m001";
  CHECK(MemberExists(m1));
  CHECK_FALSE(MemberExists(round + "/members/m009"));
  CHECK(MemberPackDir(m1) == round + "/packs/r1-m000-a1");
  CHECK(*ReadMemberFile(m1 + "/weights.bin") == "weights of m001");
  CHECK(*ReadMemberFile(m1 + "/history.jsonl") == "{\"epoch\":1}\n{\"epoch\":2}\n");
  CHECK(*ReadMemberFile(m1 + "/pool_pred.f32") == Floats({20.f, 21.f, 22.f}));
  // Records are dumped as the worker dumps member.json and metrics.json.
  const json record = {{"seed", 7}, {"pack", {{"position", 0}}}};
  CHECK(*ReadMemberFile(m1 + "/member.json") == record.dump(2) + "\n");
  CHECK(json::parse(*ReadMemberFile(m1 + "/metrics.json"))["holdout_rmse"] == 20.0);
  // The supervisor's reader takes the same paths.
  auto result = LoadMemberResult(m1, 2, 3);
  REQUIRE(result.ok());
  CHECK(result->name == "m001");
  CHECK(result->holdout_pred == std::vector<float>{20.f, 21.f});
  // Where the bytes are: a span of the pack's file of the same name.
  auto span = LocateMemberFile(m1 + "/holdout_pred.f32");
  REQUIRE(span.ok());
  CHECK_FALSE(span->whole);
  CHECK(span->file == round + "/packs/r1-m000-a1/holdout_pred.f32");
  CHECK(span->offset == 8);
  CHECK(span->length == 8);
  CHECK(MemberFileExists(m1 + "/weights.bin"));
  CHECK_FALSE(MemberFileExists(m1 + "/train_state.pt"));
  auto missing = ReadMemberFile(m1 + "/train_state.pt");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message().find("m001") != std::string::npos);
  CHECK(LocateMemberFile(m1 + "/metrics.json").status().code() == Status::Code::kInvalidArgument);
}

TEST_CASE("a member's own directory comes before its pack, and a pack's later members are found") {
  TempDir d;
  const std::string round = d.path() + "/rounds/r0000";
  PublishPack(round, "r0-m000-a1", {{"m000", 1.f}});
  const std::string own = round + "/members/m000";
  REQUIRE(MakeDirs(own).ok());
  REQUIRE(WriteFileAtomic(own + "/holdout_pred.f32", Floats({5.f, 6.f})).ok());
  CHECK(*ReadMemberFile(own + "/holdout_pred.f32") == Floats({5.f, 6.f}));
  CHECK(ReadMemberFile(own + "/weights.bin").status().code() == Status::Code::kNotFound);  // not mixed
  CHECK(LocateMemberFile(own + "/holdout_pred.f32")->whole);
  // A pack published after the round was indexed is read when one of its members is asked for.
  CHECK_FALSE(MemberExists(round + "/members/m004"));
  PublishPack(round, "r0-m004-a1", {{"m004", 4.f}});
  CHECK(*ReadMemberFile(round + "/members/m004/holdout_pred.f32") == Floats({4.f, 5.f}));
}

TEST_CASE("a member published twice is served from its latest publication, also when a pack is replaced") {
  TempDir d;
  const std::string round = d.path() + "/rounds/r0002";
  PublishPack(round, "r2-m000-a1", {{"m000", 1.f}, {"m001", 2.f}});
  CHECK(*ReadMemberFile(round + "/members/m001/holdout_pred.f32") == Floats({2.f, 3.f}));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  PublishPack(round, "r2-m001-a1", {{"m001", 50.f}});
  CHECK(*ReadMemberFile(round + "/members/m001/holdout_pred.f32") == Floats({50.f, 51.f}));
  CHECK(*ReadMemberFile(round + "/members/m000/holdout_pred.f32") == Floats({1.f, 2.f}));
  // The same pack directory published again (a crashed attempt rerun) replaces what was read.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  PublishPack(round, "r2-m000-a1", {{"m000", 70.f}});
  CHECK(*ReadMemberFile(round + "/members/m000/holdout_pred.f32") == Floats({70.f, 71.f}));
}

TEST_CASE("metrics come back parsed, and a pack file read before is served again only while it is the same") {
  TempDir d;
  const std::string round = d.path() + "/rounds/r0003";
  PublishPack(round, "r3-m000-a1", {{"m000", 1.f}, {"m001", 2.f}});
  const std::string m0 = round + "/members/m000", m1 = round + "/members/m001";
  auto metrics = ReadMemberJson(m1 + "/metrics.json");
  REQUIRE(metrics.ok());
  CHECK((*metrics)["holdout_rmse"] == 2.0);
  CHECK((*metrics)["member"] == "m001");
  CHECK(*ReadMemberJson(m0 + "/member.json") == json({{"seed", 7}, {"pack", {{"position", 0}}}}));
  CHECK(ReadMemberJson(m0 + "/weights.bin").status().code() == Status::Code::kInvalidArgument);
  // A member with its own directory: its file, parsed; one that is not JSON is Corruption naming it.
  const std::string own = round + "/members/m007";
  REQUIRE(MakeDirs(own).ok());
  REQUIRE(WriteFileAtomic(own + "/metrics.json", "{\"holdout_rmse\": 3}\n").ok());
  CHECK((*ReadMemberJson(own + "/metrics.json"))["holdout_rmse"] == 3);
  REQUIRE(WriteFileAtomic(own + "/metrics.json", "{\"holdout_rmse\": ").ok());
  auto torn = ReadMemberJson(own + "/metrics.json");
  CHECK(torn.status().code() == Status::Code::kCorruption);
  CHECK(torn.status().message().find(own + "/metrics.json") != std::string::npos);
  // Both members' predictions come from the pack's file read once; a file removed since
  // (retention) is not served from what was read.
  CHECK(*ReadMemberFile(m0 + "/holdout_pred.f32") == Floats({1.f, 2.f}));
  CHECK(*ReadMemberFile(m1 + "/holdout_pred.f32") == Floats({2.f, 3.f}));
  REQUIRE(RemoveTree(round + "/packs/r3-m000-a1/holdout_pred.f32").ok());
  CHECK(ReadMemberFile(m1 + "/holdout_pred.f32").status().code() == Status::Code::kNotFound);
  CHECK(LoadMemberResult(m1, 2, 3).status().code() == Status::Code::kNotFound);
  // Written again (another inode) with other values: those are served.
  REQUIRE(WriteFileAtomic(round + "/packs/r3-m000-a1/holdout_pred.f32", Floats({8.f, 9.f, 10.f, 11.f})).ok());
  CHECK(*ReadMemberFile(m1 + "/holdout_pred.f32") == Floats({10.f, 11.f}));
}

TEST_CASE("a damaged pack is an error naming its file and line, and unfinished packs are not read") {
  TempDir d;
  const std::string round = d.path() + "/rounds/r0003";
  PublishPack(round, "r3-m000-a1", {{"m000", 1.f}, {"m001", 2.f}});
  const std::string records = round + "/packs/r3-m000-a1/members.jsonl";
  std::string text = *ReadFile(records);
  SECTION("a torn last line") {
    REQUIRE(WriteFileAtomic(records, text.substr(0, text.size() - 5)).ok());
    auto r = ReadPackRecords(round + "/packs/r3-m000-a1");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("members.jsonl:2") != std::string::npos);
    auto m = ReadMemberFile(round + "/members/m001/weights.bin");
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().message().find("unreadable pack") != std::string::npos);
  }
  SECTION("a span past its file's end") {
    REQUIRE(WriteFileAtomic(round + "/packs/r3-m000-a1/pool_pred.f32", std::string(4, 'x')).ok());
    auto r = ReadPackRecords(round + "/packs/r3-m000-a1");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("past the end of") != std::string::npos);
    CHECK(r.status().message().find("pool_pred.f32") != std::string::npos);
  }
  SECTION("a line that is not a record") {
    REQUIRE(WriteFileAtomic(records, text + "[1, 2]\n").ok());
    auto r = ReadPackRecords(round + "/packs/r3-m000-a1");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("members.jsonl:3: not a member record") != std::string::npos);
  }
  SECTION("a line without a record, and one whose record is not an object") {
    REQUIRE(WriteFileAtomic(records, text + "{\"member\": \"m009\", \"metrics\": {}, \"files\": {}}\n").ok());
    auto none = ReadPackRecords(round + "/packs/r3-m000-a1");
    REQUIRE_FALSE(none.ok());
    CHECK(none.status().message().find("members.jsonl:3: not a member record") != std::string::npos);
    // The index skips a record's contents; reading member.json checks them, naming the line's pack.
    REQUIRE(WriteFileAtomic(records, text + "{\"member\": \"m009\", \"record\": 5, \"metrics\": {}, \"files\": {}}\n").ok());
    REQUIRE(ReadPackRecords(round + "/packs/r3-m000-a1").ok());
    auto bad = ReadMemberJson(round + "/members/m009/member.json");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == Status::Code::kCorruption);
    CHECK(bad.status().message().find("members.jsonl: the line of member m009 has no \"record\" object") !=
          std::string::npos);
  }
  SECTION("a pack still being written (<dir>.tmp) holds no member yet") {
    PackResultsWriter w(round + "/packs/r3-m007-a1");
    REQUIRE(w.Begin().ok());
    REQUIRE(w.AddFiles("m007", {{"weights.bin", std::string("w")}}).ok());
    w.SetRecord("m007", json::object());
    w.SetMetrics("m007", json::object());
    REQUIRE(w.Finish().ok());
    CHECK_FALSE(MemberExists(round + "/members/m007"));
    REQUIRE(w.Publish().ok());
    CHECK(MemberExists(round + "/members/m007"));
  }
}

TEST_CASE("the writer lists a member added again once, with its latest bytes, and leaves dropped ones out") {
  TempDir d;
  const std::string pack = d.path() + "/rounds/r0000/packs/r0-m000-a1";
  PackResultsWriter w(pack);
  REQUIRE(w.Begin().ok());
  REQUIRE(w.AddFiles("m000", {{"weights.bin", std::string("old")}}).ok());
  REQUIRE(w.AddFiles("m001", {{"weights.bin", std::string("one")}}).ok());
  REQUIRE(w.AddFiles("m000", {{"weights.bin", std::string("new!")}}).ok());
  for (const char* m : {"m000", "m001"}) {
    w.SetRecord(m, json::object());
    w.SetMetrics(m, json::object());
  }
  w.Drop("m001");
  CHECK_FALSE(w.AddFiles("m002", {{"../escape", std::string("x")}}).ok());
  REQUIRE(w.Finish().ok());
  REQUIRE(w.Publish().ok());
  auto records = ReadPackRecords(pack);
  REQUIRE(records.ok());
  REQUIRE(records->size() == 1);
  CHECK((*records)[0].name == "m000");
  CHECK((*records)[0].files.at("weights.bin").offset == 6);
  CHECK((*records)[0].files.at("weights.bin").length == 4);
  CHECK(*ReadMemberFile(d.path() + "/rounds/r0000/members/m000/weights.bin") == "new!");
}

}  // namespace
}  // namespace ens
