// Tests of orchestrator/serve_config: the shipped configs/serve.json, defaults, every class of
// error with its JSON pointer (the run config's reader: unknown keys with a suggestion, bad
// values, missing keys, syntax errors), path resolution and the daemon's own paths.
#include "orchestrator/serve/serve_config.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace ens {
namespace {

using json = nlohmann::json;

json Minimal() { return {{"runs_dir", "runs.d"}, {"state_root", "/var/lib/ens"}}; }

std::string Describe(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.pointer + ": " + e.message + "\n";
  return out;
}

std::vector<ConfigError> Validate(const json& doc, ServeConfig* out = nullptr) {
  ServeConfig scratch;
  return ValidateServeConfigText(doc.dump(2), "/cfg", out ? out : &scratch);
}

void RequireOnlyError(const json& doc, const std::string& pointer, const std::string& fragment) {
  auto errors = Validate(doc);
  INFO("errors:\n" << Describe(errors));
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].pointer == pointer);
  CHECK_THAT(errors[0].message, Catch::Contains(fragment));
}

TEST_CASE("the shipped configs/serve.json is valid", "[serve][config]") {
  auto cfg = LoadServeConfigFile(std::string(ENS_SOURCE_DIR) + "/configs/serve.json");
  INFO((cfg.ok() ? "" : cfg.status().message()));
  REQUIRE(cfg.ok());
  CHECK(cfg->runs_dir == "/etc/ensembled/runs.d");
  CHECK(cfg->state_root == "/var/lib/ensembled/runs");
  CHECK(cfg->resources.gpus == GpuSelection::Auto());
  CHECK(cfg->resources.cpu_workers == 8);
  CHECK_FALSE(cfg->preemption.enabled);
}

TEST_CASE("a minimal serve config takes the documented defaults and resolves paths", "[serve][config]") {
  ServeConfig c;
  auto errors = Validate(Minimal(), &c);
  INFO(Describe(errors));
  REQUIRE(errors.empty());
  CHECK(c.runs_dir == "/cfg/runs.d");
  CHECK(c.state_root == "/var/lib/ens");
  CHECK(c.resources.gpus == GpuSelection::Auto());
  CHECK(c.resources.cpu_workers == 2);
  CHECK(c.service.http_bind == "127.0.0.1");
  CHECK_FALSE(c.preemption.enabled);
  CHECK(c.preemption.min_priority_gap == 1);
  CHECK(c.preemption.grace_s == 60);
  CHECK(ServeStateDir(c) == "/var/lib/ens/.serve");
  ::unsetenv("RUNTIME_DIRECTORY");
  CHECK(ServeControlSocket(c) == "/var/lib/ens/.serve/control.sock");
}

TEST_CASE("serve gpus: auto, none, a count or a list", "[serve][config]") {
  ServeConfig c;
  json doc = Minimal();
  doc["resources"] = {{"gpus", 3}, {"cpu_workers", 4}};
  REQUIRE(Validate(doc, &c).empty());
  CHECK(c.resources.gpus == GpuSelection::Count(3));
  CHECK(c.resources.cpu_workers == 4);
  doc["resources"] = {{"gpus", {0, "GPU-abc"}}};
  REQUIRE(Validate(doc, &c).empty());
  CHECK(c.resources.gpus == GpuSelection::List({"0", "GPU-abc"}));
  doc["resources"] = {{"gpus", "none"}};
  REQUIRE(Validate(doc, &c).empty());
  CHECK(c.resources.gpus.none());
  doc["resources"] = {{"gpus", 0}};
  RequireOnlyError(doc, "/resources/gpus", "integer in [1, 4096]");
  doc["resources"] = {{"gpus", "all"}};
  RequireOnlyError(doc, "/resources/gpus", "\"auto\", \"none\"");
  doc["resources"] = {{"gpus", {1, 1}}};
  RequireOnlyError(doc, "/resources/gpus/1", "duplicate GPU '1'");
}

TEST_CASE("run_as: daemon by default - submitter with its allow_root, submitters_group and state_dir_mode", "[serve][config]") {
  ServeConfig c;
  REQUIRE(Validate(Minimal(), &c).empty());
  CHECK(c.run_as == RunAs::kDaemon);
  CHECK_FALSE(c.allow_root);
  CHECK(c.submitters_group.empty());
  CHECK(c.state_dir_mode == "0750");
  json doc = Minimal();
  doc["run_as"] = "submitter";
  doc["allow_root"] = true;
  doc["submitters_group"] = "ml";
  doc["state_dir_mode"] = "0700";
  REQUIRE(Validate(doc, &c).empty());
  CHECK(c.run_as == RunAs::kSubmitter);
  CHECK(c.allow_root);
  CHECK(c.submitters_group == "ml");
  CHECK(c.state_dir_mode == "0700");
  json bad = Minimal();
  bad["run_as"] = "submiter";
  RequireOnlyError(bad, "/run_as", "must be one of daemon, submitter");
  bad = Minimal();
  bad["state_dir_mode"] = "0770";
  RequireOnlyError(bad, "/state_dir_mode", "no one else write");
  bad = Minimal();
  bad["allow_root"] = "yes";
  RequireOnlyError(bad, "/allow_root", "true or false");
}

TEST_CASE("serve config errors carry their JSON pointer, every one at once", "[serve][config]") {
  json doc = Minimal();
  doc["resources"] = {{"cpu_workers", 0}, {"workers_per_gpu", 2}};
  doc["service"] = {{"http_port", 70000}, {"control_sokcet", "/x"}};
  doc["runs_dri"] = "x";
  auto errors = Validate(doc);
  INFO(Describe(errors));
  auto has = [&](const std::string& ptr, const std::string& fragment) {
    for (const auto& e : errors)
      if (e.pointer == ptr && e.message.find(fragment) != std::string::npos) return true;
    return false;
  };
  CHECK(errors.size() == 5);
  CHECK(has("/resources/cpu_workers", "integer in [1, 4096]"));
  CHECK(has("/resources/workers_per_gpu", "unknown key"));  // a run's key, not the daemon's
  CHECK(has("/service/http_port", "[0, 65535]"));
  CHECK(has("/service/control_sokcet", "did you mean 'control_socket'"));
  CHECK(has("/runs_dri", "did you mean 'runs_dir'"));
}

TEST_CASE("preemption: on with a priority gap and a grace - bad values named", "[serve][config][preemption]") {
  json doc = Minimal();
  doc["preemption"] = {{"enabled", true}, {"min_priority_gap", 3}, {"grace_s", 12.5}};
  ServeConfig c;
  auto errors = Validate(doc, &c);
  INFO(Describe(errors));
  REQUIRE(errors.empty());
  CHECK(c.preemption.enabled);
  CHECK(c.preemption.min_priority_gap == 3);
  CHECK(c.preemption.grace_s == 12.5);
  doc["preemption"] = {{"min_priority_gap", 0}};
  RequireOnlyError(doc, "/preemption/min_priority_gap", "must be an integer >= 1");
  doc["preemption"] = {{"grace_s", 0}};
  RequireOnlyError(doc, "/preemption/grace_s", "> 0");
  doc["preemption"] = {{"grace", 5}};
  RequireOnlyError(doc, "/preemption/grace", "unknown key 'grace'");
}

TEST_CASE("runs_dir and state_root are required - a syntax error says where", "[serve][config]") {
  auto errors = ValidateServeConfigText("{}", "/cfg", nullptr);
  INFO(Describe(errors));
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].pointer == "/runs_dir");
  CHECK(errors[1].pointer == "/state_root");
  errors = ValidateServeConfigText("{\n  \"runs_dir\": \"a\",\n  oops\n}", "/cfg", nullptr);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].message, Catch::StartsWith("syntax error at 3:"));
  errors = ValidateServeConfigText(R"({"runs_dir": "a", "state_root": "b", "runs_dir": "c"})", "/cfg", nullptr);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].message == "duplicate key 'runs_dir'");
}

TEST_CASE("LoadServeConfigFile names the file in every error", "[serve][config]") {
  testing::TempDir tmp;
  std::string path = tmp.Write("serve.json", R"({"runs_dir": "r", "state_root": 5})");
  auto cfg = LoadServeConfigFile(path);
  REQUIRE_FALSE(cfg.ok());
  CHECK(cfg.status().code() == Status::Code::kInvalidArgument);
  CHECK_THAT(cfg.status().message(), Catch::Contains(path + ": /state_root: must be a non-empty string"));
  CHECK_FALSE(LoadServeConfigFile(tmp / "missing.json").ok());
}

TEST_CASE("serve limits: priorities within +-1000 and in order, quotas >= 0, a token file resolved", "[serve][config]") {
  ServeConfig c;
  REQUIRE(Validate(Minimal(), &c).empty());
  CHECK(c.limits.min_priority == -100);
  CHECK(c.limits.max_priority == 10);
  CHECK(c.limits.admin_max_priority == 1000);
  CHECK(c.limits.runs == 0);
  CHECK(c.http_token_file.empty());
  json doc = Minimal();
  doc["limits"] = {{"max_priority", 5}, {"admins_group", "ops"}, {"runs", 2}, {"gpus", 4}, {"cpu_workers", 8}};
  doc["http_token_file"] = "token";
  REQUIRE(Validate(doc, &c).empty());
  CHECK(c.limits.max_priority == 5);
  CHECK(c.limits.admins_group == "ops");
  CHECK(c.limits.runs == 2);
  CHECK(c.limits.gpus == 4);
  CHECK(c.limits.cpu_workers == 8);
  CHECK(c.http_token_file == "/cfg/token");
  doc = Minimal();
  doc["limits"] = {{"max_priority", 2147483647}};
  RequireOnlyError(doc, "/limits/max_priority", "1000");
  doc["limits"] = {{"min_priority", 20}};
  RequireOnlyError(doc, "/limits/min_priority", "is above max_priority");
  doc["limits"] = {{"max_priority", 50}, {"admin_max_priority", 20}};
  RequireOnlyError(doc, "/limits/admin_max_priority", "is below max_priority");
  doc["limits"] = {{"runs", -1}};
  RequireOnlyError(doc, "/limits/runs", "");
  doc["limits"] = {{"max_prio", 1}};
  RequireOnlyError(doc, "/limits/max_prio", "");
}

}  // namespace
}  // namespace ens
