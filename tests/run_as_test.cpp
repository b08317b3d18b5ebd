// Tests of orchestrator/run_as: a submitter's uid mapped to credentials through a fake user
// database (its groups, the refusals: root without allow_root, an unknown uid, a user outside
// the submitters' group), the real database for root, and state_dir_mode's rule.
#include "orchestrator/serve/run_as.h"

#include <linux/capability.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

namespace ens {
namespace {

constexpr gid_t kTeam = 2000;

class FakeUsers final : public UserDatabase {
 public:
  std::map<uid_t, UserEntry> users;
  std::map<uid_t, std::vector<gid_t>> groups;
  std::optional<UserEntry> ByUid(uid_t uid) const override {
    auto it = users.find(uid);
    return it == users.end() ? std::nullopt : std::optional<UserEntry>(it->second);
  }
  std::vector<gid_t> GroupsOf(const UserEntry& user) const override { return groups.at(user.uid); }
  std::optional<gid_t> GroupByName(const std::string& name) const override {
    return name == "team" ? std::optional<gid_t>(kTeam) : std::nullopt;
  }
};

FakeUsers Passwd() {
  FakeUsers db;
  db.users[0] = {"root", 0, 0, "/root"};
  db.users[1001] = {"alice", 1001, 1001, "/home/alice"};
  db.users[1002] = {"bob", 1002, 1002, "/home/bob"};
  db.users[1003] = {"carol", 1003, 1003, "/home/carol"};
  db.groups[0] = {0};
  db.groups[1001] = {1001, kTeam, 3000};
  db.groups[1002] = {1002, kTeam};
  db.groups[1003] = {1003};  // not in the team
  return db;
}

RunAsPolicy Policy() {
  RunAsPolicy p;
  p.submitter = true;
  p.group = kTeam;
  p.group_name = "team";
  return p;
}

TEST_CASE("a submitter in the group runs as its uid, its primary group and every group of its", "[run_as]") {
  FakeUsers db = Passwd();
  StatusOr<Submitter> alice = MapSubmitter(1001, Policy(), db);
  REQUIRE(alice.ok());
  CHECK(alice->user.name == "alice");
  CHECK(alice->credentials.uid == 1001);
  CHECK(alice->credentials.gid == 1001);
  CHECK(alice->credentials.groups == std::vector<gid_t>{1001, kTeam, 3000});
  StatusOr<Submitter> bob = MapSubmitter(1002, Policy(), db);
  REQUIRE(bob.ok());
  CHECK(bob->credentials.groups == std::vector<gid_t>{1002, kTeam});
}

TEST_CASE("submitters the daemon cannot map are refused, each with its reason", "[run_as]") {
  FakeUsers db = Passwd();
  SECTION("a user outside the submitters' group") {
    StatusOr<Submitter> carol = MapSubmitter(1003, Policy(), db);
    REQUIRE_FALSE(carol.ok());
    CHECK(carol.status().code() == Status::Code::kInvalidArgument);
    CHECK_THAT(carol.status().message(), Catch::Contains("uid 1003 (carol) is not in group team (gid 2000)"));
  }
  SECTION("a uid without a passwd entry") {
    StatusOr<Submitter> ghost = MapSubmitter(4242, Policy(), db);
    REQUIRE_FALSE(ghost.ok());
    CHECK_THAT(ghost.status().message(), Catch::Contains("uid 4242 has no user entry"));
  }
  SECTION("root, unless allow_root") {
    StatusOr<Submitter> root = MapSubmitter(0, Policy(), db);
    REQUIRE_FALSE(root.ok());
    CHECK_THAT(root.status().message(), Catch::Contains("(root) may not submit") && Catch::Contains("allow_root"));
    RunAsPolicy allowed = Policy();
    allowed.allow_root = true;
    StatusOr<Submitter> ok = MapSubmitter(0, allowed, db);
    REQUIRE(ok.ok());
    CHECK(ok->credentials.uid == 0);
  }
}

TEST_CASE("the system's user database maps root with its groups", "[run_as]") {
  RunAsPolicy p = Policy();
  p.allow_root = true;
  StatusOr<Submitter> root = MapSubmitter(0, p, SystemUsers());
  REQUIRE(root.ok());
  CHECK(root->user.name == "root");
  CHECK(root->credentials.gid == 0);
  CHECK(std::find(root->credentials.groups.begin(), root->credentials.groups.end(), gid_t{0}) !=
        root->credentials.groups.end());
  CHECK(SystemUsers().GroupByName("root") == std::optional<gid_t>(0));
  CHECK_FALSE(SystemUsers().GroupByName("no-such-group-ens").has_value());
}

TEST_CASE("run_as submitter needs setuid, setgid, chown, dac_read_search and kill", "[run_as]") {
  std::vector<int> caps = RunAsSubmitterCapabilities();
  std::sort(caps.begin(), caps.end());
  CHECK(caps == std::vector<int>{CAP_CHOWN, CAP_DAC_READ_SEARCH, CAP_KILL, CAP_SETGID, CAP_SETUID});
}

TEST_CASE("state_dir_mode gives its owner rwx and no one else write", "[run_as]") {
  CHECK(ParseStateDirMode("0750") == std::optional<mode_t>(0750));
  CHECK(ParseStateDirMode("700") == std::optional<mode_t>(0700));
  CHECK(ParseStateDirMode("0755") == std::optional<mode_t>(0755));
  for (const char* bad : {"0770", "0640", "0777", "07750", "abc", "", "0759"}) {
    INFO(bad);
    CHECK_FALSE(ParseStateDirMode(bad).has_value());
  }
}

}  // namespace
}  // namespace ens
