// Tests of common/protocol: every message type survives encode/decode, and every malformed
// message is rejected with a reason that says what is wrong.
#include "common/ipc/protocol.h"

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ens {
namespace {

using json = nlohmann::json;

Message MustDecode(const std::string& bytes) {
  StatusOr<Message> m = DecodeMessage(bytes);
  INFO(bytes << "\n-> " << m.status().ToString());
  REQUIRE(m.ok());
  return m.value();
}

Message RoundTrip(const Message& m) {
  std::string bytes = EncodeMessage(m);
  REQUIRE(bytes.size() <= kMaxMessageBytes);
  return MustDecode(bytes);
}

// Requires DecodeMessage to reject `bytes` with InvalidArgument whose message holds every fragment.
void RequireRejected(const std::string& bytes, std::initializer_list<const char*> fragments) {
  StatusOr<Message> m = DecodeMessage(bytes);
  INFO("input: " << bytes.substr(0, 300));
  REQUIRE_FALSE(m.ok());
  INFO("status: " << m.status().ToString());
  CHECK(m.status().code() == Status::Code::kInvalidArgument);
  for (const char* f : fragments) CHECK_THAT(m.status().message(), Catch::Contains(f));
}

MemberSpec FullMember() {
  MemberSpec m;
  m.name = "wide_tanh";
  m.layers = {{64, Activation::kTanh, 0.1},
              {32, Activation::kGelu, 0.0},
              {8, Activation::kLinear, 0.25}};
  m.initializer = Initializer::kHeUniform;
  m.l1 = 1e-5;
  m.l2 = 0.003;
  m.loss = LossKind::kHuber;
  m.huber_delta = 0.75;
  m.optimizer = OptimizerKind::kSgd;
  m.lr = 0.0125;
  m.weight_decay = 0.0001;
  m.momentum = 0.9;
  m.epochs = 123;
  m.batch_size = 17;
  m.early_stopping = {true, Monitor::kValMae, 7, 0.001, false};
  m.split = SplitKind::kBootstrap;
  m.validation_split = 0.3;
  m.seed_offset = 99;
  return m;
}

TaskSpec FullTask() {
  TaskSpec t;
  t.task_id = "r3-wide_tanh";
  t.round = 3;
  t.member_index = 11;
  t.seed = 0xFEDCBA9876543210ULL;  // above INT64_MAX: must stay unsigned
  t.generation = 4;
  t.rows = 1234;
  t.data_dir = "/state/data/g4";
  t.out_dir = "/state/rounds/3/wide_tanh";
  t.excluded_file = "/state/data/g4/excluded.u64";
  t.attempt = 2;
  t.threads = 4;
  t.save_checkpoint = false;  // the non-default value, so a dropped field shows
  t.publish = false;          // likewise
  t.pack_results = true;      // likewise
  t.lane_predictions = true;  // likewise
  t.warm_from = "/state/rounds/r0002/members/wide_tanh/train_state.pt";
  t.member = FullMember();
  return t;
}

json Encoded(const Message& m) { return json::parse(EncodeMessage(m)); }

// FullTask() as a task message's JSON.
json EncodedFullTask() {
  Message task;
  task.type = MessageType::kTask;
  task.task = FullTask();
  return Encoded(task);
}

TEST_CASE("Every message type round-trips", "[protocol]") {
  Message m;
  m.slot = 7;
  m.pid = 4242;

  SECTION("ready") {
    m.type = MessageType::kReady;
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kReady);
    CHECK(d.slot == 7);
    CHECK(d.pid == 4242);
    CHECK(d.rss_kb == 0);
    CHECK_FALSE(Encoded(m).contains("rss_kb"));
  }
  SECTION("ready with its RSS") {
    m.type = MessageType::kReady;
    m.rss_kb = 1'234'567;
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kReady);
    CHECK(d.rss_kb == 1'234'567);
  }
  SECTION("heartbeat") {
    m.type = MessageType::kHeartbeat;
    m.task_id = "r0-m001";
    m.epoch = 12;
    m.rss_kb = 5'000'000'000LL;
    m.phase = TaskPhase::kWriting;
    m.gpu_reserved_kb = 3'145'728;
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kHeartbeat);
    CHECK(d.pid == 4242);
    CHECK(d.task_id == "r0-m001");
    CHECK(d.epoch == 12);
    CHECK(d.rss_kb == 5'000'000'000LL);
    CHECK(d.phase == TaskPhase::kWriting);
    CHECK(d.gpu_reserved_kb == 3'145'728);
    m.gpu_reserved_kb = 0;  // a CPU worker's heartbeat leaves it out
    CHECK_FALSE(Encoded(m).contains("gpu_reserved_kb"));
    CHECK(RoundTrip(m).gpu_reserved_kb == 0);
  }
  SECTION("done") {
    m.type = MessageType::kDone;
    m.task_id = "r1-m000";
    m.metrics = {{"holdout_rmse", 0.5}, {"device", "cuda:0"}, {"epochs_run", 9}};
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kDone);
    CHECK(d.task_id == "r1-m000");
    CHECK(d.metrics == m.metrics);
    CHECK_FALSE(d.recycle);
    m.recycle = true;
    m.recycle_reason = "rss above limit";
    Message r = RoundTrip(m);
    CHECK(r.recycle);
    CHECK(r.recycle_reason == "rss above limit");
  }
  SECTION("failed") {
    m.type = MessageType::kFailed;
    m.task_id = "r2-m003";
    m.error = "CUDA out of memory: \"tried\" to allocate\n2 GiB";
    m.permanent = true;
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kFailed);
    CHECK(d.error == m.error);
    CHECK(d.permanent);
    CHECK_FALSE(d.recycle);
    m.permanent = false;
    m.recycle = true;
    Message r = RoundTrip(m);
    CHECK_FALSE(r.permanent);
    CHECK(r.recycle);
  }
  SECTION("shutdown") {
    m.type = MessageType::kShutdown;
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kShutdown);
    CHECK(d.slot == 7);
  }
  SECTION("unusable") {
    m.type = MessageType::kUnusable;
    m.pid = 4242;
    m.error = "given GPU GPU-1234, but CUDA sees no device";
    Message d = RoundTrip(m);
    CHECK(d.type == MessageType::kUnusable);
    CHECK(d.pid == 4242);
    CHECK(d.error == m.error);
    json j = json::parse(EncodeMessage(m));
    j.erase("error");
    RequireRejected(j.dump(), {"unusable", "error"});
  }
  SECTION("task with a full MemberSpec") {
    m.type = MessageType::kTask;
    m.task = FullTask();
    Message d = RoundTrip(m);
    REQUIRE(d.type == MessageType::kTask);
    const TaskSpec& t = d.task;
    CHECK(t.task_id == "r3-wide_tanh");
    CHECK(t.round == 3);
    CHECK(t.member_index == 11);
    CHECK(t.seed == 0xFEDCBA9876543210ULL);
    CHECK(t.generation == 4);
    CHECK(t.rows == 1234);
    CHECK(t.data_dir == "/state/data/g4");
    CHECK(t.out_dir == "/state/rounds/3/wide_tanh");
    CHECK(t.excluded_file == "/state/data/g4/excluded.u64");
    CHECK(t.attempt == 2);
    CHECK(t.threads == 4);
    CHECK_FALSE(t.save_checkpoint);
    CHECK_FALSE(t.publish);
    CHECK(t.pack_results);
    CHECK(t.lane_predictions);
    CHECK(t.warm_from == "/state/rounds/r0002/members/wide_tanh/train_state.pt");
    const MemberSpec& mem = t.member;
    CHECK(mem.name == "wide_tanh");
    REQUIRE(mem.layers.size() == 3);
    CHECK(mem.layers[0].units == 64);
    CHECK(mem.layers[0].activation == Activation::kTanh);
    CHECK(mem.layers[0].dropout == 0.1);
    CHECK(mem.layers[2].activation == Activation::kLinear);
    CHECK(mem.layers[2].dropout == 0.25);
    CHECK(mem.initializer == Initializer::kHeUniform);
    CHECK(mem.l1 == 1e-5);
    CHECK(mem.l2 == 0.003);
    CHECK(mem.loss == LossKind::kHuber);
    CHECK(mem.huber_delta == 0.75);
    CHECK(mem.optimizer == OptimizerKind::kSgd);
    CHECK(mem.lr == 0.0125);
    CHECK(mem.weight_decay == 0.0001);
    CHECK(mem.momentum == 0.9);
    CHECK(mem.epochs == 123);
    CHECK(mem.batch_size == 17);
    CHECK(mem.early_stopping.enabled);
    CHECK(mem.early_stopping.monitor == Monitor::kValMae);
    CHECK(mem.early_stopping.patience == 7);
    CHECK(mem.early_stopping.min_delta == 0.001);
    CHECK_FALSE(mem.early_stopping.restore_best);
    CHECK(mem.split == SplitKind::kBootstrap);
    CHECK(mem.validation_split == 0.3);
    CHECK(mem.seed_offset == 99);
    CHECK(MemberToJson(mem) == MemberToJson(FullMember()));
  }
}

TEST_CASE("Encoding carries version, type name and slot", "[protocol]") {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.slot = 3;
  m.pid = 10;
  json j = Encoded(m);
  CHECK(j["v"] == kProtocolVersion);
  CHECK(j["type"] == "heartbeat");
  CHECK(j["slot"] == 3);
  CHECK(std::string(MessageTypeName(MessageType::kTask)) == "task");
  CHECK(std::string(MessageTypeName(MessageType::kShutdown)) == "shutdown");
}

TEST_CASE("A message of exactly kMaxMessageBytes is accepted, one byte more is not",
          "[protocol]") {
  Message m;
  m.type = MessageType::kReady;
  m.pid = 1;
  std::string bytes = EncodeMessage(m);
  bytes.append(kMaxMessageBytes - bytes.size(), ' ');  // trailing whitespace is valid JSON
  REQUIRE(bytes.size() == kMaxMessageBytes);
  CHECK(MustDecode(bytes).pid == 1);
  bytes.push_back(' ');
  RequireRejected(bytes, {"8193 bytes", "exceeds 8192"});
}

TEST_CASE("Malformed messages are rejected with the reason", "[protocol]") {
  Message ready;
  ready.type = MessageType::kReady;
  ready.pid = 55;
  const json good = Encoded(ready);

  SECTION("not JSON") { RequireRejected("hello there", {"not a JSON object"}); }
  SECTION("a JSON array") { RequireRejected("[1, 2, 3]", {"not a JSON object"}); }
  SECTION("empty") { RequireRejected("", {"not a JSON object"}); }
  SECTION("a truncated encoding") {
    Message task;
    task.type = MessageType::kTask;
    task.task = FullTask();
    std::string bytes = EncodeMessage(task);
    RequireRejected(bytes.substr(0, bytes.size() / 2), {"not a JSON object"});
  }
  SECTION("wrong version") {
    json j = good;
    j["v"] = kProtocolVersion + 1;
    RequireRejected(j.dump(), {"protocol version 2", "expected 1"});
  }
  SECTION("version missing") {
    json j = good;
    j.erase("v");
    RequireRejected(j.dump(), {"'v'"});
  }
  SECTION("unknown type") {
    json j = good;
    j["type"] = "reboot";
    RequireRejected(j.dump(), {"unknown type 'reboot'"});
  }
  SECTION("negative slot") {
    json j = good;
    j["slot"] = -1;
    RequireRejected(j.dump(), {"'slot'", "out of range"});
  }
  SECTION("slot as a string") {
    json j = good;
    j["slot"] = "0";
    RequireRejected(j.dump(), {"'slot'", "not an integer"});
  }
  SECTION("pid as a string") {
    json j = good;
    j["pid"] = "55";
    RequireRejected(j.dump(), {"ready", "'pid'", "not an integer"});
  }
  SECTION("ready's rss_kb negative or a string") {
    json j = good;
    j["rss_kb"] = -1;
    RequireRejected(j.dump(), {"ready", "'rss_kb'", "out of range"});
    j["rss_kb"] = "12";
    RequireRejected(j.dump(), {"ready", "'rss_kb'", "not an integer"});
  }
  SECTION("pid zero") {
    json j = good;
    j["pid"] = 0;
    RequireRejected(j.dump(), {"'pid'", "out of range"});
  }
  SECTION("done without metrics object") {
    Message done;
    done.type = MessageType::kDone;
    done.pid = 9;
    done.task_id = "t";
    json j = Encoded(done);
    j["metrics"] = json::array();
    RequireRejected(j.dump(), {"'metrics'"});
  }
  SECTION("failed with a non-boolean permanent") {
    Message failed;
    failed.type = MessageType::kFailed;
    failed.pid = 9;
    failed.task_id = "t";
    failed.error = "boom";
    json j = Encoded(failed);
    j["permanent"] = 1;
    RequireRejected(j.dump(), {"'permanent'"});
  }
  SECTION("recycle that is not a boolean") {
    Message done;
    done.type = MessageType::kDone;
    done.pid = 9;
    done.task_id = "t";
    json j = Encoded(done);
    j["recycle"] = "yes";
    RequireRejected(j.dump(), {"done", "'recycle'"});
  }
  SECTION("heartbeat without task_id") {
    Message hb;
    hb.type = MessageType::kHeartbeat;
    hb.pid = 9;
    json j = Encoded(hb);
    j.erase("task_id");
    RequireRejected(j.dump(), {"heartbeat", "'task_id'"});
  }
  SECTION("heartbeat with a negative GPU reservation") {
    Message hb;
    hb.type = MessageType::kHeartbeat;
    hb.pid = 9;
    hb.task_id = "t";
    json j = Encoded(hb);
    j["gpu_reserved_kb"] = -5;
    RequireRejected(j.dump(), {"heartbeat", "'gpu_reserved_kb'"});
  }
  SECTION("heartbeat with an unknown phase") {
    Message hb;
    hb.type = MessageType::kHeartbeat;
    hb.pid = 9;
    hb.task_id = "t";
    json j = Encoded(hb);
    j["phase"] = "napping";
    RequireRejected(j.dump(), {"heartbeat", "'phase'", "napping"});
  }
}

TEST_CASE("A heartbeat without 'phase' (an older worker) is a training heartbeat", "[protocol]") {
  Message hb;
  hb.type = MessageType::kHeartbeat;
  hb.pid = 9;
  hb.task_id = "t";
  hb.phase = TaskPhase::kSetup;
  json j = Encoded(hb);
  CHECK(j["phase"] == "setup");
  j.erase("phase");
  auto d = DecodeMessage(j.dump());
  REQUIRE(d.ok());
  CHECK(d->phase == TaskPhase::kTraining);
}

TEST_CASE("A task without 'publish' (an older supervisor) is published", "[protocol]") {
  json j = EncodedFullTask();
  REQUIRE(j["task"].contains("publish"));
  j["task"].erase("publish");
  auto m = DecodeMessage(j.dump());
  REQUIRE(m.ok());
  CHECK(m->task.publish);
}

TEST_CASE("A task without 'pack_results' or 'lane_predictions' (an older supervisor) keeps the old behaviour", "[protocol]") {
  // pack_results absent: a directory a member; lane_predictions absent: the GEMM forward a member
  // recorded before 2026-12-08 predicted with (verify retrains it to those bits).
  const std::pair<const char*, bool TaskSpec::*> fields[] = {{"pack_results", &TaskSpec::pack_results},
                                                            {"lane_predictions", &TaskSpec::lane_predictions}};
  for (const auto& [name, field] : fields) {
    INFO(name);
    json j = EncodedFullTask();
    REQUIRE(j["task"].contains(name));
    j["task"].erase(name);
    auto m = DecodeMessage(j.dump());
    REQUIRE(m.ok());
    CHECK_FALSE(m->task.*field);
    j["task"][name] = "yes";
    auto bad = DecodeMessage(j.dump());
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message().find(name) != std::string::npos);
  }
}

TEST_CASE("A task without 'warm_from' (a cold start, or an older supervisor) starts cold", "[protocol]") {
  json j = EncodedFullTask();
  j["task"].erase("warm_from");
  auto m = DecodeMessage(j.dump());
  REQUIRE(m.ok());
  CHECK(m->task.warm_from.empty());
  j["task"]["warm_from"] = 7;
  auto bad = DecodeMessage(j.dump());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("warm_from") != std::string::npos);
}

TEST_CASE("A member record writes its spec once and gives back the whole task, also from an older record",
          "[protocol]") {
  const TaskSpec t = FullTask();
  json record = {{"seed", t.seed}};
  SetMemberRecordTask(t, &record);
  CHECK(record["spec"] == MemberToJson(t.member));
  CHECK_FALSE(record["task"].contains("member"));
  CHECK(record["seed"] == t.seed);
  TaskSpec back;
  Status s = TaskOfMemberRecord(record, &back);
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK(TaskToJson(back) == TaskToJson(t));

  // A record written before the spec was written once: the member inside "task" is read.
  json older = {{"spec", MemberToJson(FullMember())}, {"task", TaskToJson(t)}};
  older["spec"]["name"] = "not_read";
  TaskSpec old_back;
  REQUIRE(TaskOfMemberRecord(older, &old_back).ok());
  CHECK(TaskToJson(old_back) == TaskToJson(t));

  json no_spec = record;
  no_spec.erase("spec");
  TaskSpec none;
  Status missing = TaskOfMemberRecord(no_spec, &none);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("spec"));
  json no_task = record;
  no_task.erase("task");
  CHECK_THAT(TaskOfMemberRecord(no_task, &none).message(), Catch::Contains("task"));
  record["spec"]["epochs"] = 0;
  Status bad = TaskOfMemberRecord(record, &none);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("epochs"));
}

TEST_CASE("A pack file writes each distinct member spec once and reads back every task", "[protocol]") {
  // Three tasks, two specs: the second task's member differs from the first only by name, the
  // third by its learning rate too.
  std::vector<TaskSpec> tasks(3, FullTask());
  tasks[1].member.name = "wide_tanh_2";
  tasks[1].member_index = 12;
  tasks[2].member.name = "wide_tanh_3";
  tasks[2].member.lr = 0.5;
  const std::string text = PackFileText(tasks);
  const json file = json::parse(text);
  REQUIRE(file["specs"].size() == 2);
  CHECK_FALSE(file["specs"][0].contains("name"));
  CHECK(file["tasks"][0]["member_spec"] == 0);
  CHECK(file["tasks"][1]["member_spec"] == 0);
  CHECK(file["tasks"][2]["member_spec"] == 1);
  CHECK_FALSE(file["tasks"][0].contains("member"));
  auto back = ParsePackFile(text, "slot0.pack.json");
  INFO(back.status().message());
  REQUIRE(back.ok());
  REQUIRE(back->size() == 3);
  for (size_t i = 0; i < tasks.size(); ++i) CHECK(TaskToJson((*back)[i]) == TaskToJson(tasks[i]));

  // A pack file of tasks holding their own member (before 2026-12-07) reads the same.
  json older = {{"tasks", json::array()}};
  for (const TaskSpec& t : tasks) older["tasks"].push_back(TaskToJson(t));
  auto old_back = ParsePackFile(older.dump(), "old.pack.json");
  REQUIRE(old_back.ok());
  for (size_t i = 0; i < tasks.size(); ++i) CHECK(TaskToJson((*old_back)[i]) == TaskToJson(tasks[i]));

  // Each damage to the file, and the place its error names.
  const std::vector<std::pair<std::function<void(json&)>, const char*>> damages = {
      {[](json& f) { f["tasks"][2]["member_spec"] = 2; }, "/tasks/2: field 'member_spec'"},
      {[](json& f) { f["tasks"][1].erase("member_name"); }, "/tasks/1: field 'member_name'"},
      {[](json& f) { f["tasks"][0]["member_name"] = "../escape"; }, "/tasks/0: field 'member_name'"},
      {[](json& f) { f["specs"][1]["epochs"] = 0; }, "/specs/1: "},
      {[](json& f) { f["tasks"][0].erase("attempt"); }, "/tasks/0: task: "},
  };
  for (const auto& [damage, fragment] : damages) {
    json damaged = file;
    damage(damaged);
    auto r = ParsePackFile(damaged.dump(), "slot0.pack.json");
    INFO(fragment);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("slot0.pack.json") && Catch::Contains(fragment));
  }
}

TEST_CASE("Malformed tasks are rejected with the field at fault", "[protocol]") {
  Message task;
  task.type = MessageType::kTask;
  task.task = FullTask();
  const json good = Encoded(task);
  REQUIRE(DecodeMessage(good.dump()).ok());

  SECTION("task missing") {
    json j = good;
    j.erase("task");
    RequireRejected(j.dump(), {"'task' missing"});
  }
  SECTION("task not an object") {
    json j = good;
    j["task"] = "r0-m000";
    RequireRejected(j.dump(), {"task: not an object"});
  }
  SECTION("task without member") {
    json j = good;
    j["task"].erase("member");
    RequireRejected(j.dump(), {"task", "'member' missing"});
  }
  SECTION("member with an unknown key") {
    json j = good;
    j["task"]["member"]["learning_rate"] = 0.1;
    RequireRejected(j.dump(), {"member", "unknown key 'learning_rate'"});
  }
  SECTION("member with an invalid value") {
    json j = good;
    j["task"]["member"]["epochs"] = 0;
    RequireRejected(j.dump(), {"member", "/epochs"});
  }
  SECTION("save_checkpoint that is not a boolean") {
    json j = good;
    j["task"]["save_checkpoint"] = 1;
    RequireRejected(j.dump(), {"'save_checkpoint'"});
  }
  SECTION("publish that is not a boolean") {
    json j = good;
    j["task"]["publish"] = "no";
    RequireRejected(j.dump(), {"'publish'"});
  }
  SECTION("negative seed") {
    json j = good;
    j["task"]["seed"] = -5;
    RequireRejected(j.dump(), {"'seed'", "unsigned"});
  }
  SECTION("attempt zero") {
    json j = good;
    j["task"]["attempt"] = 0;
    RequireRejected(j.dump(), {"'attempt'", "out of range"});
  }
  SECTION("task_id too long") {
    json j = good;
    j["task"]["task_id"] = std::string(257, 'x');
    RequireRejected(j.dump(), {"'task_id'"});
  }
}

}  // namespace
}  // namespace ens
