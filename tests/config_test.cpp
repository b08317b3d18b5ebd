// Tests of common/config: the shipped example, every class of error with its JSON pointer,
// member resolution, path resolution and the member JSON round trip.
#include "common/config/config.h"
#include "orchestrator/serve/serve_daemon.h"
#include "common/ipc/protocol.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ens {
namespace {

using json = nlohmann::json;

// The smallest valid document; tests change one thing in it.
json Minimal() {
  return {{"state_dir", "state"},
          {"members", {{"count", 1}, {"defaults", {{"layers", {{{"units", 4}}}}}}}}};
}

std::string Describe(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.pointer + ": " + e.message + "\n";
  return out;
}

std::vector<ConfigError> Validate(const std::string& text, Config* out = nullptr,
                                  const std::string& base_dir = "/cfg/dir") {
  Config scratch;
  return ValidateConfigText(text, base_dir, out != nullptr ? out : &scratch);
}
std::vector<ConfigError> Validate(const json& doc, Config* out = nullptr) {
  return Validate(doc.dump(2), out);
}

// The error at `pointer`, or nullptr; asserts nothing so callers can say what they expect.
const ConfigError* At(const std::vector<ConfigError>& errors, const std::string& pointer) {
  for (const ConfigError& e : errors) {
    if (e.pointer == pointer) return &e;
  }
  return nullptr;
}

// Requires exactly one error, at `pointer`, whose message contains `fragment`.
void RequireOnlyError(const json& doc, const std::string& pointer, const std::string& fragment) {
  std::vector<ConfigError> errors = Validate(doc);
  INFO("errors:\n" << Describe(errors));
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].pointer == pointer);
  CHECK_THAT(errors[0].message, Catch::Contains(fragment));
}

Config MustParse(const json& doc) {
  Config c;
  std::vector<ConfigError> errors = Validate(doc, &c);
  INFO("errors:\n" << Describe(errors));
  REQUIRE(errors.empty());
  return c;
}

TEST_CASE("example.json parses into the documented demo", "[config]") {
  const std::string path = std::string(ENS_SOURCE_DIR) + "/configs/example.json";
  StatusOr<Config> loaded = LoadConfigFile(path);
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  const Config& c = loaded.value();
  CHECK(c.run_name == "demo");
  namespace fs = std::filesystem;
  CHECK(c.state_dir == (fs::absolute(ENS_SOURCE_DIR) / "run/demo").lexically_normal().string());
  CHECK(c.run_seed == 42);
  CHECK(c.resources.gpus == GpuSelection::Auto());
  CHECK(c.resources.workers_per_gpu == 1);
  CHECK(c.resources.cpu_workers == 2);
  CHECK(c.resources.threads_per_worker == 1);
  CHECK(c.data.source == DataSource::kSynthetic);
  CHECK(c.data.synthetic_features == 10);
  CHECK(c.data.synthetic_noise == 1.0);
  CHECK(c.data.initial_rows == 200);
  CHECK(c.data.pool_rows == 3000);
  CHECK(c.data.holdout_rows == 1000);
  CHECK(c.mutation.policy == MutationPolicyKind::kQueryByCommittee);
  CHECK(c.mutation.k == 150);
  CHECK(c.rounds.count == 4);
  CHECK_FALSE(c.rounds.stop_below_error.has_value());
  CHECK(c.heartbeat_timeout_s == 60.0);
  CHECK(c.max_task_attempts == 3);
  CHECK(c.pack_size == 0);  // "auto"
  CHECK(c.pack_results);  // results_layout "packs"
  CHECK(c.service.control_socket.empty());
  CHECK(c.service.http_port == 0);
  CHECK(c.service.http_bind == "127.0.0.1");
  CHECK(c.service.log_file.empty());

  REQUIRE(c.members.size() == 8);
  for (size_t i = 0; i < c.members.size(); ++i) {
    const MemberSpec& m = c.members[i];
    INFO("member " << i);
    char name[8];
    std::snprintf(name, sizeof name, "m%03zu", i);
    CHECK(m.name == name);
    CHECK(m.epochs == 60);
    CHECK(m.batch_size == 32);
    CHECK(m.optimizer == OptimizerKind::kAdam);
    CHECK(m.lr == 0.003);
    CHECK(m.loss == LossKind::kHuber);
    CHECK(m.huber_delta == 1.0);
    CHECK(m.l2 == 1e-5);
    CHECK(m.early_stopping.enabled);
    CHECK(m.early_stopping.patience == 10);
    CHECK(m.early_stopping.restore_best);
    CHECK(m.validation_split == 0.2);
    CHECK(m.split == SplitKind::kRandom);
    const bool relu = i % 2 == 0;
    REQUIRE(m.layers.size() == (relu ? 2u : 3u));
    for (const LayerSpec& l : m.layers) {
      CHECK(l.units == (relu ? 64 : 32));
      CHECK(l.activation == (relu ? Activation::kRelu : Activation::kTanh));
    }
    CHECK(m.initializer == (relu ? Initializer::kHeUniform : Initializer::kGlorotUniform));
  }
}

TEST_CASE("a minimal config gets the documented defaults", "[config]") {
  Config c = MustParse(Minimal());
  CHECK(c.run_name == "ensembled");
  CHECK(c.run_seed == 0);
  CHECK(c.resources.gpus == GpuSelection::Auto());
  CHECK(c.data.source == DataSource::kSynthetic);
  CHECK(c.data.pool_rows == 2000);
  CHECK(c.mutation.policy == MutationPolicyKind::kNone);
  CHECK(c.rounds.count == 1);
  REQUIRE(c.members.size() == 1);
  const MemberSpec& m = c.members[0];
  CHECK(m.name == "m000");
  CHECK(m.layers[0].activation == Activation::kRelu);
  CHECK(m.epochs == 50);
  CHECK(m.lr == 1e-3);
  CHECK(m.weight_decay == 0.0);
  CHECK(m.early_stopping.monitor == Monitor::kValLoss);
}

TEST_CASE("comments of both kinds are accepted", "[config]") {
  const std::string text = R"(// leading comment
{
  /* block
     comment */ "state_dir": "s", // trailing
  "members": {"count": 2, /* inline */ "defaults": {"layers": [{"units": 3}]}}
}
// final comment
)";
  Config c;
  std::vector<ConfigError> errors = Validate(text, &c);
  INFO(Describe(errors));
  REQUIRE(errors.empty());
  CHECK(c.members.size() == 2);
}

TEST_CASE("a syntax error reports origin and line:column", "[config]") {
  const std::string text = "// header\n{\n  \"state_dir\": \"x\",\n  \"run_seed\": ,\n}\n";
  StatusOr<Config> c = ParseConfig(text, "conf/run.json", "/cfg");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Status::Code::kInvalidArgument);
  INFO(c.status().message());
  CHECK_THAT(c.status().message(), Catch::StartsWith("conf/run.json: syntax error at 4:15: "));

  // At the end of the text the position is still a real line and column.
  std::vector<ConfigError> eof = Validate(std::string("{\n  \"a\": 1"));
  REQUIRE(eof.size() == 1);
  CHECK(eof[0].pointer.empty());
  CHECK_THAT(eof[0].message, Catch::StartsWith("syntax error at 2:"));
}

TEST_CASE("unknown keys are errors at every level, with a suggestion", "[config]") {
  json top = Minimal();
  top["run_nmae"] = "x";
  RequireOnlyError(top, "/run_nmae", "unknown key 'run_nmae' (did you mean 'run_name'?)");

  json layer = Minimal();
  layer["members"]["defaults"]["layers"][0]["unist"] = 4;
  RequireOnlyError(layer, "/members/defaults/layers/0/unist", "did you mean 'units'");

  json member = Minimal();
  member["members"]["variants"] = {{{"epcohs", 3}}};
  RequireOnlyError(member, "/members/variants/0/epcohs", "did you mean 'epochs'");

  json slash = Minimal();
  slash["resources"] = {{"a/b~c", 1}};
  RequireOnlyError(slash, "/resources/a~1b~0c", "unknown key 'a/b~c'");  // RFC 6901 escapes

  json far = Minimal();
  far["rounds"] = {{"zzzzzzzz", 1}};
  std::vector<ConfigError> errors = Validate(far);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].message == "unknown key 'zzzzzzzz'");
}

TEST_CASE("wrong types are errors", "[config]") {
  json epochs = Minimal();
  epochs["members"]["defaults"]["epochs"] = "ten";
  RequireOnlyError(epochs, "/members/defaults/epochs", "must be an integer >= 1, got \"ten\"");

  json fractional = Minimal();
  fractional["members"]["defaults"]["batch_size"] = 2.5;
  RequireOnlyError(fractional, "/members/defaults/batch_size", "must be an integer");

  json section = Minimal();
  section["rounds"] = json::array();
  RequireOnlyError(section, "/rounds", "must be an object");

  json flag = Minimal();
  flag["members"]["defaults"]["early_stopping"] = {{"enabled", "yes"}};
  RequireOnlyError(flag, "/members/defaults/early_stopping/enabled", "true or false");

  json gpus = Minimal();
  gpus["resources"] = {{"gpus", "two"}};
  RequireOnlyError(gpus, "/resources/gpus", "\"auto\", \"none\", a GPU count in [1, 4096] or a non-empty array");

  RequireOnlyError(json::array(), "", "must be an object");
}

TEST_CASE("out-of-range values are errors", "[config]") {
  json units = Minimal();
  units["members"]["defaults"]["layers"][0]["units"] = 0;
  RequireOnlyError(units, "/members/defaults/layers/0/units", "must be an integer >= 1, got 0");

  json dropout = Minimal();
  dropout["members"]["defaults"]["layers"][0]["dropout"] = 1.0;
  RequireOnlyError(dropout, "/members/defaults/layers/0/dropout", "in [0, 1)");

  json split = Minimal();  // 0 is allowed (every row trains: the paper options' case below)
  split["members"]["defaults"]["validation_split"] = -0.1;
  RequireOnlyError(split, "/members/defaults/validation_split", "in [0, 1)");

  json lr = Minimal();
  lr["members"]["defaults"]["lr"] = -0.1;
  RequireOnlyError(lr, "/members/defaults/lr", "> 0");

  json layout = Minimal();
  layout["results_layout"] = "pack";
  RequireOnlyError(layout, "/results_layout", "must be \"packs\" or \"members\", got \"pack\"");

  json seed = Minimal();
  seed["run_seed"] = -1;
  RequireOnlyError(seed, "/run_seed", "unsigned");

  json huge = Minimal();
  huge["members"]["defaults"]["epochs"] = 10000000000ULL;
  RequireOnlyError(huge, "/members/defaults/epochs", "must be an integer >= 1");

  json name = Minimal();
  name["run_name"] = "my run";
  RequireOnlyError(name, "/run_name", "[A-Za-z0-9_.-]");

  json features = Minimal();
  features["data"] = {{"synthetic", {{"features", 4}}}};
  RequireOnlyError(features, "/data/synthetic/features", ">= 5");
}

TEST_CASE("enum values are checked against their lists", "[config]") {
  json activation = Minimal();
  activation["members"]["defaults"]["layers"][0]["activation"] = "rellu";
  RequireOnlyError(activation, "/members/defaults/layers/0/activation",
                   "must be one of relu, tanh, sigmoid, swish, gelu, linear, got \"rellu\" "
                   "(did you mean 'relu'?)");

  json optimizer = Minimal();
  optimizer["members"]["defaults"]["optimizer"] = "rmsprop";
  RequireOnlyError(optimizer, "/members/defaults/optimizer", "adam, adamw, sgd");

  json source = Minimal();
  source["data"] = {{"source", "parquet"}};
  RequireOnlyError(source, "/data/source", "synthetic, csv, npy");

  json policy = Minimal();
  policy["mutation"] = {{"policy", 7}};
  RequireOnlyError(policy, "/mutation/policy", "must be one of none,");
}

TEST_CASE("an unknown member option is an error at its pointer, never a default", "[config]") {
  json doc = Minimal();
  doc["members"]["list"] = {
      {{"layers", {{{"units", 4}, {"activation", "relux"}}}}, {"initializer", "he_normal"}},
      {{"optimizer", "adamx"}, {"loss", "Huber"}},
      {{"early_stopping", {{"monitor", "val_acc"}}}, {"split", ""}}};
  std::vector<ConfigError> errors = Validate(doc);
  INFO("errors:\n" << Describe(errors));
  CHECK(errors.size() == 6);  // every mistake in one pass
  const std::pair<const char*, const char*> kExpected[] = {
      {"/members/list/0/layers/0/activation", "got \"relux\" (did you mean 'relu'?)"},
      {"/members/list/0/initializer", "must be one of glorot_uniform, he_uniform, lecun_normal"},
      {"/members/list/1/optimizer", "got \"adamx\" (did you mean 'adam'?)"},
      {"/members/list/1/loss", "must be one of mse, mae, huber, cross_entropy, gaussian_nll, got \"Huber\""},
      {"/members/list/2/early_stopping/monitor", "must be one of val_loss, val_mae, val_mse"},
      {"/members/list/2/split", "must be one of random, bootstrap, got \"\""}};
  for (const auto& [pointer, fragment] : kExpected) {
    INFO(pointer);
    const ConfigError* e = At(errors, pointer);
    REQUIRE(e != nullptr);
    CHECK_THAT(e->message, Catch::Contains(fragment));
  }
}

TEST_CASE("required and conditionally required keys", "[config]") {
  json no_state = Minimal();
  no_state.erase("state_dir");
  RequireOnlyError(no_state, "/state_dir", "is required");

  json csv = Minimal();
  csv["data"] = {{"source", "csv"}, {"train_path", "train.csv"}};
  RequireOnlyError(csv, "/data/target_column", "is required when source is \"csv\"");

  json npy = Minimal();
  npy["data"] = {{"source", "npy"}, {"x_path", "x.npy"}};
  RequireOnlyError(npy, "/data/y_path", "is required when source is \"npy\"");

  json pool_k = Minimal();
  pool_k["mutation"] = {{"policy", "query_by_committee"}, {"k", 0}};
  RequireOnlyError(pool_k, "/mutation/k", ">= 1 when policy is \"query_by_committee\"");

  json pool_no_k = Minimal();
  pool_no_k["mutation"] = {{"policy", "append_from_pool"}};
  RequireOnlyError(pool_no_k, "/mutation/k", ">= 1");

  json command = Minimal();
  command["mutation"] = {{"policy", "command"}, {"argv", json::array()}};
  RequireOnlyError(command, "/mutation/argv", "non-empty array");

  json command_missing = Minimal();
  command_missing["mutation"] = {{"policy", "command"}};
  RequireOnlyError(command_missing, "/mutation/argv", "non-empty array");
}

TEST_CASE("members: resolution order, names and layer rules", "[config]") {
  json doc = Minimal();
  doc["members"] = {
      {"defaults",
       {{"epochs", 7}, {"layers", {{{"units", 8}}}}, {"early_stopping", {{"patience", 2}}}}},
      {"list",
       {{{"name", "wide"}, {"layers", {{{"units", 256}}}}},
        {{"early_stopping", {{"enabled", true}}}, {"optimizer", "adamw"}}}},
      {"count", 3},
      {"variants", {{{"lr", 0.5}}, {{"optimizer", "adamw"}, {"weight_decay", 0}}}}};
  Config c = MustParse(doc);
  REQUIRE(c.members.size() == 5);
  CHECK(c.members[0].name == "wide");
  CHECK(c.members[0].layers.size() == 1);
  CHECK(c.members[0].layers[0].units == 256);  // replaced, not merged with the defaults
  CHECK(c.members[1].name == "m001");
  CHECK(c.members[1].early_stopping.enabled);
  CHECK(c.members[1].early_stopping.patience == 2);  // early_stopping merges per key
  CHECK(c.members[1].weight_decay == 0.01);          // adamw default
  CHECK(c.members[2].name == "m002");
  CHECK(c.members[2].lr == 0.5);
  CHECK(c.members[3].optimizer == OptimizerKind::kAdamW);
  CHECK(c.members[3].weight_decay == 0.0);  // given explicitly, so no adamw default
  CHECK(c.members[4].lr == 0.5);            // variants cycle
  for (const MemberSpec& m : c.members) CHECK(m.epochs == 7);

  json no_variants = Minimal();
  no_variants["members"]["count"] = 3;
  CHECK(MustParse(no_variants).members.size() == 3);

  json count_defaults = Minimal();
  count_defaults["members"].erase("count");
  count_defaults["members"]["variants"] = {{{"lr", 0.1}}, {{"lr", 0.2}}};
  CHECK(MustParse(count_defaults).members.size() == 2);  // count defaults to the variants
}

TEST_CASE("members: every error has the right pointer", "[config]") {
  json dup = Minimal();
  dup["members"]["list"] = {{{"name", "a"}}, {{"name", "a"}}};
  dup["members"]["count"] = 0;
  RequireOnlyError(dup, "/members/list/1/name", "duplicate member name 'a'");

  json dup_variant = Minimal();
  dup_variant["members"]["variants"] = {{{"name", "solo"}}};
  dup_variant["members"]["count"] = 3;
  RequireOnlyError(dup_variant, "/members/variants/0/name", "duplicate member name 'solo'");

  json none = Minimal();
  none["members"]["count"] = 0;
  RequireOnlyError(none, "/members", "at least one member");

  json missing = Minimal();
  missing.erase("members");
  RequireOnlyError(missing, "/members", "is required");

  json no_layers = Minimal();
  no_layers["members"]["defaults"].erase("layers");
  RequireOnlyError(no_layers, "/members/defaults/layers", "at least one layer");

  json empty_layers = Minimal();
  empty_layers["members"]["list"] = {{{"layers", json::array()}}};
  empty_layers["members"]["count"] = 0;
  RequireOnlyError(empty_layers, "/members/list/0/layers", "non-empty array");

  json no_units = Minimal();
  no_units["members"]["defaults"]["layers"] = {{{"activation", "tanh"}}};
  RequireOnlyError(no_units, "/members/defaults/layers/0/units", "is required");
}

TEST_CASE("several errors are all reported, one per line", "[config]") {
  json doc = Minimal();
  doc.erase("state_dir");
  doc["rounds"] = {{"count", 0}};
  doc["members"]["variants"] = {{{"layers", {{{"units", 0}}}}}, {{"epcohs", 1}}};
  doc["members"]["count"] = 4;
  doc["mutation"] = {{"policy", "command"}, {"timeout_s", 0}};
  std::vector<ConfigError> errors = Validate(doc);
  INFO(Describe(errors));
  const std::vector<std::string> expected = {"/state_dir",
                                             "/rounds/count",
                                             "/members/variants/0/layers/0/units",
                                             "/members/variants/1/epcohs",
                                             "/mutation/argv",
                                             "/mutation/timeout_s"};
  CHECK(errors.size() == expected.size());  // variants used twice are still one error each
  for (const std::string& pointer : expected) CHECK(At(errors, pointer) != nullptr);

  StatusOr<Config> c = ParseConfig(doc.dump(), "x.json", "/cfg");
  REQUIRE_FALSE(c.ok());
  const std::string& msg = c.status().message();
  CHECK(std::count(msg.begin(), msg.end(), '\n') == static_cast<long>(expected.size()) - 1);
  CHECK_THAT(msg, Catch::Contains("x.json: /rounds/count: must be an integer >= 1, got 0"));
  CHECK_THAT(msg, Catch::Contains("\nx.json: /"));
}

TEST_CASE("repeated keys are reported instead of silently overwritten", "[config]") {
  const std::string text = R"({"state_dir": "s", "members": {"count": 1,
    "defaults": {"layers": [{"units": 1}, {"units": 2, "units": 3}]}}, "state_dir": "t"})";
  std::vector<ConfigError> errors = Validate(text);
  INFO(Describe(errors));
  REQUIRE(errors.size() == 2);
  CHECK(At(errors, "/members/defaults/layers/1/units") != nullptr);
  CHECK(At(errors, "/state_dir") != nullptr);
  CHECK_THAT(errors[0].message + errors[1].message, Catch::Contains("duplicate key"));
}

TEST_CASE("relative paths resolve against the base directory", "[config]") {
  json doc = Minimal();
  doc["state_dir"] = "../state";
  doc["data"] = {{"source", "csv"},
                 {"train_path", "d/train.csv"},
                 {"pool_path", "/abs/pool.csv"},
                 {"target_column", "y"}};
  doc["mutation"] = {{"policy", "command"}, {"argv", {"./tools/mutate.py", "./arg"}}};
  Config c = MustParse(doc);
  CHECK(c.state_dir == "/cfg/state");
  CHECK(c.data.train_path == "/cfg/dir/d/train.csv");
  CHECK(c.data.pool_path == "/abs/pool.csv");
  REQUIRE(c.mutation.argv.size() == 2);
  CHECK(c.mutation.argv[0] == "/cfg/dir/tools/mutate.py");
  CHECK(c.mutation.argv[1] == "./arg");  // arguments are the program's business

  json bare = Minimal();
  bare["mutation"] = {{"policy", "command"}, {"argv", {"python3", "m.py"}}};
  CHECK(MustParse(bare).mutation.argv[0] == "python3");  // looked up in PATH

  json npy = Minimal();
  npy["data"] = {{"source", "npy"}, {"train_path", "arrays/train"}};
  Config n = MustParse(npy);
  CHECK(n.data.x_path == "/cfg/dir/arrays/train.x.npy");
  CHECK(n.data.y_path == "/cfg/dir/arrays/train.y.npy");
}

void RequireSameMember(const MemberSpec& a, const MemberSpec& b);  // below, with the round-trip tests

TEST_CASE("command members: argv required, layers not, paths resolved, mlp keys kept apart", "[config]") {
  json doc = Minimal();
  doc["members"] = {{"list",
                     {{{"name", "mine"},
                       {"model", {{"kind", "command"}, {"argv", {"./train.py", "--fast"}}, {"timeout_s", 30},
                                  {"predict_argv", {"python3", "predict.py"}}}}},
                      {{"name", "ours"}, {"layers", {{{"units", 4}}}}}}}};
  Config c = MustParse(doc);
  REQUIRE(c.members.size() == 2);
  const ModelSpec& m = c.members[0].model;
  CHECK(m.kind == ModelKind::kCommand);
  CHECK(m.argv == std::vector<std::string>{"/cfg/dir/train.py", "--fast"});
  CHECK(m.timeout_s == 30);
  CHECK(m.predict_argv == std::vector<std::string>{"python3", "predict.py"});  // looked up in PATH
  CHECK(c.members[1].model.kind == ModelKind::kMlp);
  // The built-in kind is written as before "model" existed: earlier runs' configs compare equal.
  CHECK_FALSE(MemberToJson(c.members[1]).contains("model"));
  CHECK(MemberToJson(c.members[0])["model"]["kind"] == "command");

  json no_argv = Minimal();
  no_argv["members"] = {{"count", 1}, {"defaults", {{"model", {{"kind", "command"}}}}}};
  RequireOnlyError(no_argv, "/members/defaults/model/argv", "non-empty array");
  json empty_program = Minimal();
  empty_program["members"] = {{"count", 1}, {"defaults", {{"model", {{"kind", "command"}, {"argv", {""}}}}}}};
  RequireOnlyError(empty_program, "/members/defaults/model/argv/0", "non-empty string");
  json argv_on_mlp = Minimal();
  argv_on_mlp["members"]["defaults"]["model"] = {{"argv", {"x"}}};
  RequireOnlyError(argv_on_mlp, "/members/defaults/model", "for kind \"command\" only");
  json bad_kind = Minimal();
  bad_kind["members"]["defaults"]["model"] = {{"kind", "transformer"}};
  RequireOnlyError(bad_kind, "/members/defaults/model/kind", "must be one of");
  json bad_timeout = Minimal();
  bad_timeout["members"]["defaults"]["model"] = {{"kind", "command"}, {"argv", {"x"}}, {"timeout_s", 0}};
  RequireOnlyError(bad_timeout, "/members/defaults/model/timeout_s", "");
  json typo = Minimal();
  typo["members"]["defaults"]["model"] = {{"kind", "command"}, {"argv", {"x"}}, {"timeout", 5}};
  RequireOnlyError(typo, "/members/defaults/model/timeout", "unknown key");

  // Through a task message and back.
  MemberSpec back;
  REQUIRE(MemberFromJson(json::parse(MemberToJson(c.members[0]).dump()), &back).ok());
  RequireSameMember(c.members[0], back);
}

TEST_CASE("gpu lists accept indices and UUIDs", "[config]") {
  json doc = Minimal();
  doc["resources"] = {{"gpus", {0, "GPU-1234"}}, {"workers_per_gpu", 4}};
  Config c = MustParse(doc);
  CHECK(c.resources.gpus == GpuSelection::List({"0", "GPU-1234"}));
  CHECK(c.resources.workers_per_gpu == 4);

  doc["resources"]["gpus"] = {1, -1, 1};
  std::vector<ConfigError> errors = Validate(doc);
  INFO(Describe(errors));
  CHECK(errors.size() == 2);
  CHECK(At(errors, "/resources/gpus/1") != nullptr);
  CHECK(At(errors, "/resources/gpus/2") != nullptr);  // duplicate

  json none = Minimal();
  none["resources"] = {{"gpus", "none"}};
  CHECK(MustParse(none).resources.gpus.none());

  json stop = Minimal();
  stop["rounds"] = {{"stop_below_error", 0.25}};
  CHECK(MustParse(stop).rounds.stop_below_error == 0.25);
}

TEST_CASE("gpus may be a count - 0, a fraction or more than 4096 is an error at its pointer", "[config]") {
  json doc = Minimal();
  doc["resources"] = {{"gpus", 2}};
  Config c = MustParse(doc);
  CHECK(c.resources.gpus == GpuSelection::Count(2));
  CHECK(ConfigToJson(c)["resources"]["gpus"] == 2);  // and back
  for (const json& bad : {json(0), json(-1), json(1.5), json(5000)}) {
    INFO(bad.dump());
    doc["resources"]["gpus"] = bad;
    std::vector<ConfigError> errors = Validate(doc);
    INFO(Describe(errors));
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].pointer == "/resources/gpus");
    CHECK_THAT(errors[0].message, Catch::Contains("a GPU count in [1, 4096]"));
  }
}

TEST_CASE("LoadConfigFile names the path and resolves against the file's folder", "[config]") {
  StatusOr<Config> missing = LoadConfigFile("/nonexistent/dir/run.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/dir/run.json"));

  namespace fs = std::filesystem;
  fs::path dir = fs::path(ENS_BINARY_DIR) / ("config_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path file = dir / "run.json";
  std::ofstream(file) << "// a run\n" << Minimal().dump();
  StatusOr<Config> loaded = LoadConfigFile(file.string());
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  CHECK(loaded->state_dir == (dir / "state").string());

  std::ofstream(file) << "{\"state_dir\": 3}";
  StatusOr<Config> bad = LoadConfigFile(file.string());
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::StartsWith(file.string() + ": /state_dir: "));

  StatusOr<Config> is_dir = LoadConfigFile(dir.string());
  CHECK_FALSE(is_dir.ok());
  CHECK_THAT(is_dir.status().message(), Catch::Contains(dir.string()));
  fs::remove_all(dir);
}

void RequireSameMember(const MemberSpec& a, const MemberSpec& b) {
  CHECK(a.name == b.name);
  REQUIRE(a.layers.size() == b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    CHECK(a.layers[i].units == b.layers[i].units);
    CHECK(a.layers[i].activation == b.layers[i].activation);
    CHECK(a.layers[i].dropout == b.layers[i].dropout);
  }
  CHECK(a.initializer == b.initializer);
  CHECK(a.l1 == b.l1);
  CHECK(a.l2 == b.l2);
  CHECK(a.loss == b.loss);
  CHECK(a.huber_delta == b.huber_delta);
  CHECK(a.optimizer == b.optimizer);
  CHECK(a.lr == b.lr);
  CHECK(a.weight_decay == b.weight_decay);
  CHECK(a.momentum == b.momentum);
  CHECK(a.epochs == b.epochs);
  CHECK(a.batch_size == b.batch_size);
  CHECK(a.early_stopping.enabled == b.early_stopping.enabled);
  CHECK(a.early_stopping.monitor == b.early_stopping.monitor);
  CHECK(a.early_stopping.patience == b.early_stopping.patience);
  CHECK(a.early_stopping.min_delta == b.early_stopping.min_delta);
  CHECK(a.early_stopping.restore_best == b.early_stopping.restore_best);
  CHECK(a.split == b.split);
  CHECK(a.validation_split == b.validation_split);
  CHECK(a.seed_offset == b.seed_offset);
  CHECK(a.model.kind == b.model.kind);
  CHECK(a.model.argv == b.model.argv);
  CHECK(a.model.timeout_s == b.model.timeout_s);
  CHECK(a.model.predict_argv == b.model.predict_argv);
}

TEST_CASE("MemberToJson and MemberFromJson round-trip exactly", "[config]") {
  MemberSpec m;
  m.name = "odd.one-1";
  m.layers = {{17, Activation::kGelu, 1.0 / 3.0},
              {5, Activation::kSwish, 0.0},
              {1, Activation::kLinear, 0.1}};
  m.initializer = Initializer::kLecunNormal;
  m.l1 = 1e-300;
  m.l2 = 0.1 + 0.2;
  m.loss = LossKind::kMae;
  m.huber_delta = 2.5;
  m.optimizer = OptimizerKind::kSgd;
  m.lr = std::nextafter(0.01, 1.0);
  m.weight_decay = 0.0;
  m.momentum = 0.9;
  m.epochs = 123;
  m.batch_size = 7;
  m.early_stopping = {true, Monitor::kValMae, 0, 1e-7, false};
  m.split = SplitKind::kBootstrap;
  m.validation_split = 0.15;
  m.seed_offset = 18446744073709551615ULL;

  // Through text, as in task messages and checkpoints.
  json j = json::parse(MemberToJson(m).dump());
  MemberSpec back;
  Status s = MemberFromJson(j, &back);
  INFO(s.ToString());
  REQUIRE(s.ok());
  RequireSameMember(m, back);
  CHECK(MemberToJson(back) == MemberToJson(m));

  // adamw with an explicit zero stays zero after the trip.
  m.optimizer = OptimizerKind::kAdamW;
  REQUIRE(MemberFromJson(json::parse(MemberToJson(m).dump()), &back).ok());
  CHECK(back.weight_decay == 0.0);

  // An unnamed spec stays unnamed: no name is invented on the way.
  MemberSpec unnamed;
  unnamed.layers = {{2, Activation::kRelu, 0.0}};
  REQUIRE(MemberFromJson(MemberToJson(unnamed), &back).ok());
  CHECK(back.name.empty());

  // A resolved config member survives as well.
  Config c = MustParse(Minimal());
  REQUIRE(MemberFromJson(MemberToJson(c.members[0]), &back).ok());
  RequireSameMember(c.members[0], back);
}

TEST_CASE("MemberFromJson rejects bad input with pointers", "[config]") {
  MemberSpec out;
  out.name = "untouched";
  json j = MemberToJson(MemberSpec{});
  j["layers"] = {{{"units", 3}}};
  j["bogus"] = 1;
  j["epochs"] = 0;
  Status s = MemberFromJson(j, &out);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("/bogus: unknown key 'bogus'"));
  CHECK_THAT(s.message(), Catch::Contains("/epochs: must be an integer >= 1"));
  CHECK(out.name == "untouched");

  Status no_layers = MemberFromJson(json{{"name", "x"}}, &out);
  REQUIRE_FALSE(no_layers.ok());
  CHECK_THAT(no_layers.message(), Catch::Contains("/layers"));

  CHECK_FALSE(MemberFromJson(json::array(), &out).ok());
}

TEST_CASE("MemberFromJson rejects an unknown option name instead of defaulting", "[config]") {
  MemberSpec spec;
  spec.layers = {{3, Activation::kTanh, 0.0}};
  const json good = MemberToJson(spec);
  const std::pair<json::json_pointer, const char*> kBad[] = {
      {json::json_pointer("/layers/0/activation"), "relux"},
      {json::json_pointer("/initializer"), "orthogonal"},
      {json::json_pointer("/loss"), "MSE"},
      {json::json_pointer("/optimizer"), "adamx"},
      {json::json_pointer("/early_stopping/monitor"), "val_acc"},
      {json::json_pointer("/split"), "stratified"}};
  for (const auto& [pointer, name] : kBad) {
    INFO(pointer.to_string() << " = " << name);
    json j = good;
    j[pointer] = name;
    MemberSpec out;
    out.name = "untouched";
    Status s = MemberFromJson(j, &out);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == Status::Code::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains(pointer.to_string() + ": must be one of ") &&
                                Catch::Contains(std::string("got \"") + name + "\""));
    CHECK(out.name == "untouched");
  }
}

}  // namespace
}  // namespace ens

namespace ens {
namespace {

// Found by scripts/fuzz (config target): a number too large for a double made the parser
// throw out_of_range, which escaped and aborted `ensemblectl validate-config`.
// A classification config over a csv file; tests change one thing in it.
json Classifying() {
  json doc = Minimal();
  doc["task"] = "classification";
  doc["data"] = {{"source", "csv"}, {"train_path", "t.csv"}, {"target_column", "label"}};
  return doc;
}

TEST_CASE("task classification: cross_entropy by default, bald scoring, written back", "[config][classification]") {
  json doc = Classifying();
  doc["members"]["defaults"]["label_smoothing"] = 0.1;
  doc["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}};
  Config c = MustParse(doc);
  CHECK(c.task == TaskKind::kClassification);
  CHECK(c.members[0].loss == LossKind::kCrossEntropy);
  CHECK(c.members[0].label_smoothing == 0.1);
  CHECK(c.mutation.score == CommitteeScore::kBald);
  json normal = ConfigToJson(c);
  CHECK(normal["task"] == "classification");
  CHECK(normal["mutation"]["score"] == "bald");
  CHECK(normal["members"]["list"][0]["loss"] == "cross_entropy");
  // A regression config's normalised form is what earlier versions wrote: no task, no score.
  json plain = ConfigToJson(MustParse(Minimal()));
  CHECK_FALSE(plain.contains("task"));
  CHECK_FALSE(plain["mutation"].contains("score"));
  CHECK_FALSE(plain["members"]["list"][0].contains("label_smoothing"));
}

TEST_CASE("results_layout: packs by default and not written back, members written back", "[config]") {
  json doc = Minimal();
  Config packs = MustParse(doc);
  CHECK(packs.pack_results);
  CHECK_FALSE(ConfigToJson(packs).contains("results_layout"));
  doc["results_layout"] = "members";
  Config members = MustParse(doc);
  CHECK_FALSE(members.pack_results);
  CHECK(ConfigToJson(members)["results_layout"] == "members");
}

TEST_CASE("mutation.batch: top by default and not written back, diverse for query_by_committee only", "[config]") {
  json doc = Minimal();
  doc["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}};
  Config top = MustParse(doc);
  CHECK(top.mutation.batch == BatchMode::kTop);
  CHECK_FALSE(ConfigToJson(top)["mutation"].contains("batch"));  // as earlier versions wrote it
  doc["mutation"]["batch"] = "diverse";
  Config diverse = MustParse(doc);
  CHECK(diverse.mutation.batch == BatchMode::kDiverse);
  CHECK(ConfigToJson(diverse)["mutation"]["batch"] == "diverse");
  doc["mutation"]["batch"] = "spread";
  RequireOnlyError(doc, "/mutation/batch", "must be one of top, diverse");
  doc["mutation"] = {{"policy", "append_from_pool"}, {"k", 5}, {"batch", "diverse"}};
  RequireOnlyError(doc, "/mutation/batch", "is for policy \"query_by_committee\" (policy is \"append_from_pool\")");
}

TEST_CASE("task and loss, score and data that do not fit are errors at their pointers", "[config][classification]") {
  json mse = Classifying();
  mse["members"]["defaults"]["loss"] = "mse";
  RequireOnlyError(mse, "/members/defaults/loss", "regression loss");
  json ce = Minimal();
  ce["members"]["defaults"]["loss"] = "cross_entropy";
  RequireOnlyError(ce, "/members/defaults/loss", "needs task \"classification\"");
  json smoothing = Minimal();
  smoothing["members"]["defaults"]["label_smoothing"] = 0.1;
  RequireOnlyError(smoothing, "/members/defaults/label_smoothing", "applies to task \"classification\" only");
  json range = Classifying();
  range["members"]["defaults"]["label_smoothing"] = 1.0;
  RequireOnlyError(range, "/members/defaults/label_smoothing", "[0, 1)");
  json bald = Minimal();
  bald["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}, {"score", "bald"}};
  RequireOnlyError(bald, "/mutation/score", "needs task \"classification\"");
  json unknown = Classifying();
  unknown["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}, {"score", "entropie"}};
  RequireOnlyError(unknown, "/mutation/score", "entropy");
  json synthetic = Classifying();
  synthetic["data"] = {{"source", "synthetic"}};
  RequireOnlyError(synthetic, "/data/source", "regression target");
  json none = Classifying();
  none.erase("data");
  RequireOnlyError(none, "/data", "required for task");
  json monitor = Classifying();
  monitor["members"]["defaults"]["early_stopping"] = {{"enabled", true}, {"monitor", "val_mae"}};
  RequireOnlyError(monitor, "/members/defaults/early_stopping/monitor", "val_loss");
  json task = Minimal();
  task["task"] = "clasification";
  RequireOnlyError(task, "/task", "classification");
}

TEST_CASE("every score reads back from the normalised config as itself, on every head", "[config][classification]") {
  // "std" on a classifier (whose default is "bald") or a Gaussian head ("epistemic") is written
  // out; on plain regression, where "std" is the default, it is left out as before.
  json gaussian = Minimal();
  gaussian["members"]["defaults"]["loss"] = "gaussian_nll";
  struct Case {
    json doc;
    std::vector<std::string> scores;
  };
  const Case cases[] = {{Minimal(), {"std"}},
                        {Classifying(), {"std", "entropy", "bald"}},
                        {gaussian, {"std", "epistemic"}}};
  for (const Case& c : cases) {
    for (const std::string& score : c.scores) {
      json doc = c.doc;
      doc["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}, {"score", score}};
      // The effective config a served run reads (unset values dropped), read back.
      StatusOr<std::string> text = EffectiveConfigText(MustParse(doc));
      INFO(score << ": " << (text.ok() ? *text : text.status().message()));
      REQUIRE(text.ok());
      Config back;
      REQUIRE(ValidateConfigText(*text, "/", &back).empty());
      CHECK(Name(back.mutation.score) == score);
    }
  }
  CHECK_FALSE(ConfigToJson(MustParse(Minimal()))["mutation"].contains("score"));
}

TEST_CASE("gaussian_nll: every member or none, regression only, scored by epistemic", "[config][gaussian]") {
  json doc = Minimal();
  doc["members"]["defaults"]["loss"] = "gaussian_nll";
  doc["members"]["count"] = 3;
  doc["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}};
  Config c = MustParse(doc);
  CHECK(c.members[2].loss == LossKind::kGaussianNll);
  CHECK(c.mutation.score == CommitteeScore::kEpistemic);
  json mixed = Minimal();
  mixed["members"] = {{"defaults", {{"layers", {{{"units", 4}}}}}},
                      {"list", {{{"loss", "gaussian_nll"}}, {{"loss", "mse"}}}}};
  RequireOnlyError(mixed, "/members/list/1/loss", "every member of a run or of none");
  json classify = Classifying();
  classify["members"]["defaults"]["loss"] = "gaussian_nll";
  RequireOnlyError(classify, "/members/defaults/loss", "regression loss");
  json epistemic = Minimal();
  epistemic["mutation"] = {{"policy", "query_by_committee"}, {"k", 5}, {"score", "epistemic"}};
  RequireOnlyError(epistemic, "/mutation/score", "gaussian_nll");
}

TEST_CASE("torchscript members: a path resolved against the config, init, no layers of their own", "[config][script]") {
  json doc = Minimal();
  doc["members"] = {{"defaults", {{"layers", {{{"units", 4}}}}}},
                    {"list", {{{"model", {{"kind", "torchscript"}, {"path", "nets/model.pt"}, {"init", "file"}}}},
                              {{"name", "plain"}}}}};
  Config c = MustParse(doc);
  CHECK(c.members[0].model.kind == ModelKind::kTorchscript);
  CHECK(c.members[0].model.path == "/cfg/dir/nets/model.pt");
  CHECK(c.members[0].model.path_at == "/members/list/0/model/path");
  CHECK(c.members[0].model.init == ScriptInit::kFile);
  CHECK(c.members[0].layers.empty());  // the defaults' layers are the MLP members'
  CHECK(c.members[1].layers.size() == 1);
  // Written back and read again, it is the same member (the worker reads it so).
  MemberSpec back;
  REQUIRE(MemberFromJson(MemberToJson(c.members[0]), &back).ok());
  CHECK(back.model.path == c.members[0].model.path);
  CHECK(back.model.init == ScriptInit::kFile);
  CHECK(ConfigToJson(c)["members"]["list"][0]["model"]["path"] == "/cfg/dir/nets/model.pt");

  json no_path = Minimal();
  no_path["members"]["defaults"]["model"] = {{"kind", "torchscript"}};
  no_path["members"]["defaults"].erase("layers");
  RequireOnlyError(no_path, "/members/defaults/model/path", "is required");
  json own_layers = Minimal();
  own_layers["members"]["defaults"]["model"] = {{"kind", "torchscript"}, {"path", "m.pt"}};
  RequireOnlyError(own_layers, "/members/defaults/layers", "does not apply");
  json mlp_path = Minimal();
  mlp_path["members"]["defaults"]["model"] = {{"path", "m.pt"}};
  RequireOnlyError(mlp_path, "/members/defaults/model/path", "torchscript");
  json bad_init = Minimal();
  bad_init["members"]["defaults"]["model"] = {{"kind", "torchscript"}, {"path", "m.pt"}, {"init", "random"}};
  bad_init["members"]["defaults"].erase("layers");
  RequireOnlyError(bad_init, "/members/defaults/model/init", "member");
}

TEST_CASE("warm_start: its epoch budget defaults to epochs, written back only when on, not for command members",
          "[config][warm]") {
  json doc = Minimal();
  doc["members"]["defaults"]["epochs"] = 30;
  doc["members"]["defaults"]["warm_start"] = true;
  Config c = MustParse(doc);
  CHECK(c.members[0].warm_start);
  CHECK(c.members[0].warm_start_epochs == 30);
  json j = MemberToJson(c.members[0]);
  CHECK(j["warm_start"] == true);
  CHECK(j["warm_start_epochs"] == 30);
  MemberSpec back;
  REQUIRE(MemberFromJson(j, &back).ok());
  CHECK(back.warm_start_epochs == 30);
  // Off (the default), the member's JSON is what earlier versions wrote.
  CHECK_FALSE(MemberToJson(MustParse(Minimal()).members[0]).contains("warm_start"));

  json budget = Minimal();
  budget["members"]["defaults"]["warm_start_epochs"] = 0;
  RequireOnlyError(budget, "/members/defaults/warm_start_epochs", ">= 1");
  json command = Minimal();
  command["members"]["defaults"] = {{"warm_start", true}, {"model", {{"kind", "command"}, {"argv", {"train"}}}}};
  RequireOnlyError(command, "/members/defaults/warm_start", "command member");
}

TEST_CASE("early_stopping.refit: read, written back only when on, refused without early stopping or with warm_start",
          "[config][refit]") {
  json doc = Minimal();
  doc["members"]["defaults"]["early_stopping"] = {{"enabled", true}, {"patience", 5}, {"refit", true}};
  const Config c = MustParse(doc);
  CHECK(c.members[0].early_stopping.refit);
  const json j = MemberToJson(c.members[0]);
  CHECK(j["early_stopping"]["refit"] == true);
  MemberSpec back;
  REQUIRE(MemberFromJson(j, &back).ok());
  CHECK(back.early_stopping.refit);
  // Off (the default), the member's JSON is what earlier versions wrote.
  CHECK_FALSE(MemberToJson(MustParse(Minimal()).members[0])["early_stopping"].contains("refit"));

  SECTION("without early stopping there is no length to refit for") {
    doc["members"]["defaults"]["early_stopping"]["enabled"] = false;
    RequireOnlyError(doc, "/members/defaults/early_stopping/refit", "set early_stopping.enabled to true");
  }
  SECTION("warm_start starts elsewhere") {
    doc["members"]["defaults"]["warm_start"] = true;
    RequireOnlyError(doc, "/members/defaults/early_stopping/refit", "choose one");
  }
  SECTION("a string is not a bool") {
    doc["members"]["defaults"]["early_stopping"]["refit"] = "yes";
    RequireOnlyError(doc, "/members/defaults/early_stopping/refit", "must be true or false");
  }
}

TEST_CASE("a number too large for a double is a config error, not a crash", "[config]") {
  Config cfg;
  std::vector<ConfigError> errors = ValidateConfigText(" " + std::string(400, '9'), "/tmp", &cfg);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].message.find("number overflow") != std::string::npos);
  errors = ValidateConfigText("{\"state_dir\": \"s\", \"run_seed\": 1" + std::string(400, '0') + "}", "/tmp", &cfg);
  REQUIRE(errors.size() == 1);
}

// A regression config over a csv file with two targets; tests change one thing in it.
json TwoTargets() {
  json doc = Minimal();
  doc["data"] = {{"source", "csv"}, {"train_path", "t.csv"}, {"target_columns", {"a", "b"}}};
  return doc;
}

TEST_CASE("target_columns: several regression targets, written back only when several", "[config][targets]") {
  Config c = MustParse(TwoTargets());
  CHECK(c.data.target_columns == std::vector<std::string>{"a", "b"});
  json normal = ConfigToJson(c);
  CHECK(normal["data"]["target_columns"] == json({"a", "b"}));
  CHECK_FALSE(normal["data"].contains("target_column"));

  json one = TwoTargets();
  one["data"]["target_columns"] = {"a"};  // one listed target is target_column
  Config c1 = MustParse(one);
  CHECK(c1.data.target_columns == std::vector<std::string>{"a"});
  CHECK(ConfigToJson(c1)["data"]["target_column"] == "a");
  CHECK_FALSE(ConfigToJson(c1)["data"].contains("target_columns"));
  json single = TwoTargets();
  single["data"].erase("target_columns");
  single["data"]["target_column"] = "a";
  CHECK(ConfigToJson(MustParse(single)) == ConfigToJson(c1));
}

TEST_CASE("target_columns that do not fit the data, the task or the members are errors at their pointers",
          "[config][targets]") {
  json both = TwoTargets();
  both["data"]["target_column"] = "a";
  RequireOnlyError(both, "/data/target_columns", "not both");
  json twice = TwoTargets();
  twice["data"]["target_columns"] = {"a", "b", "a"};
  RequireOnlyError(twice, "/data/target_columns/2", "listed twice");
  json empty = TwoTargets();
  empty["data"]["target_columns"] = json::array();
  RequireOnlyError(empty, "/data/target_columns", "at least one");
  json feature = TwoTargets();
  feature["data"]["feature_columns"] = {"x", "b"};
  RequireOnlyError(feature, "/data/feature_columns/1", "must not be a target column");
  json npy = TwoTargets();
  npy["data"] = {{"source", "npy"}, {"train_path", "t"}, {"target_columns", {"a", "b"}}};
  RequireOnlyError(npy, "/data/target_columns", "an npy y of shape (rows, T) has T targets");
  json npy_column = npy;  // target_column on an npy source stays ignored, as before target_columns
  npy_column["data"].erase("target_columns");
  npy_column["data"]["target_column"] = "y";
  CHECK(Validate(npy_column).empty());
  json classify = TwoTargets();
  classify["task"] = "classification";
  RequireOnlyError(classify, "/data/target_columns", "one label column");
  json gaussian = TwoTargets();
  gaussian["members"]["defaults"]["loss"] = "gaussian_nll";
  RequireOnlyError(gaussian, "/data/target_columns", "gaussian_nll head, which predicts one target");
  json command = TwoTargets();
  command["members"] = {{"count", 1}, {"defaults", {{"model", {{"kind", "command"}, {"argv", {"./train.py"}}}}}}};
  RequireOnlyError(command, "/data/target_columns", "is a command member, which predicts one target");
  // The same check for an npy y of several columns, which only the data file tells.
  Config c = MustParse(Minimal());
  CHECK(TargetCountProblem(c, 1, "y.npy").empty());
  CHECK(TargetCountProblem(c, 3, "y.npy").empty());
  c.task = TaskKind::kClassification;
  CHECK_THAT(TargetCountProblem(c, 3, "y.npy"), Catch::Contains("y.npy gives 3 targets"));
}

TEST_CASE("retention: keep_rounds and pins are read, bad ones named, and written only when set", "[config]") {
  Config plain = MustParse(Minimal());
  CHECK(plain.retention.KeepsEverything());
  CHECK(plain.retention.pin.empty());
  CHECK_FALSE(ConfigToJson(plain).contains("retention"));

  json doc = Minimal();
  doc["retention"] = {{"keep_rounds", 5}, {"pin", {12, 3}}};
  Config c = MustParse(doc);
  CHECK(c.retention.keep_rounds == 5);
  CHECK(c.retention.pin == std::vector<int>{3, 12});
  CHECK(ConfigToJson(c)["retention"] == json{{"keep_rounds", 5}, {"pin", {3, 12}}});

  json negative = Minimal();
  negative["retention"] = {{"keep_rounds", -1}};
  RequireOnlyError(negative, "/retention/keep_rounds", "must be an integer >= 0");
  json twice = Minimal();
  twice["retention"] = {{"pin", {4, 4}}};
  RequireOnlyError(twice, "/retention/pin/1", "round 4 is pinned twice");
  json word = Minimal();
  word["retention"] = {{"pin", {1, "last"}}};
  RequireOnlyError(word, "/retention/pin/1", "must be a round number");
  json scalar = Minimal();
  scalar["retention"] = {{"pin", 3}};
  RequireOnlyError(scalar, "/retention/pin", "must be a list of round numbers");
  json unknown = Minimal();
  unknown["retention"] = {{"keep_round", 3}};
  CHECK(At(Validate(unknown), "/retention/keep_round") != nullptr);
}

}  // namespace
}  // namespace ens

namespace ens {
namespace {

TEST_CASE("the deep-ensembles paper's options: torch_default init, adversarial_eps and validation_split 0",
          "[config]") {
  json doc = Minimal();
  doc["members"]["defaults"]["initializer"] = "torch_default";
  doc["members"]["defaults"]["adversarial_eps"] = 0.01;
  doc["members"]["defaults"]["validation_split"] = 0;
  const Config c = MustParse(doc);
  REQUIRE(c.members.size() == 1);
  CHECK(c.members[0].initializer == Initializer::kTorchDefault);
  CHECK(c.members[0].adversarial_eps == 0.01);
  CHECK(c.members[0].validation_split == 0.0);
  // They survive the normalised form a run keeps (and a worker reads).
  MemberSpec back;
  REQUIRE(MemberFromJson(MemberToJson(c.members[0]), &back).ok());
  CHECK(back.initializer == Initializer::kTorchDefault);
  CHECK(back.adversarial_eps == 0.01);
  CHECK(back.validation_split == 0.0);

  SECTION("validation_split 0 with early stopping is refused at the split") {
    doc["members"]["defaults"]["early_stopping"] = {{"enabled", true}};
    RequireOnlyError(doc, "/members/defaults/validation_split", "early_stopping watches them");
  }
  SECTION("a negative adversarial_eps is refused") {
    doc["members"]["defaults"]["adversarial_eps"] = -0.1;
    RequireOnlyError(doc, "/members/defaults/adversarial_eps", ">= 0");
  }
  SECTION("validation_split 1 still is") {
    doc["members"]["defaults"]["validation_split"] = 1.0;
    RequireOnlyError(doc, "/members/defaults/validation_split", "[0, 1)");
  }
}

}  // namespace
}  // namespace ens

namespace ens {
namespace {

TEST_CASE("resources.cuda_graphs is retired - still read, so older configs parse, and no task carries it", "[config]") {
  CHECK_FALSE(MustParse(Minimal()).resources.cuda_graphs);
  json doc = Minimal();
  doc["resources"] = {{"cuda_graphs", true}};
  CHECK(MustParse(doc).resources.cuda_graphs);
  doc["resources"]["cuda_graphs"] = "yes";
  RequireOnlyError(doc, "/resources/cuda_graphs", "must be true or false");
  TaskSpec t;
  t.task_id = "r0-m000";
  t.member.layers = {{4, Activation::kRelu, 0.0}};
  CHECK_FALSE(TaskToJson(t).contains("cuda_graphs"));
}

}  // namespace
}  // namespace ens
