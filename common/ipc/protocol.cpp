#include "common/ipc/protocol.h"

#include <unordered_map>

#include "common/config/class_list.h"
#include "common/config/config_validator.h"

namespace ens {
namespace {

using json = nlohmann::json;

struct TypeName {
  MessageType type;
  const char* name;
};
constexpr TypeName kTypeNames[] = {
    {MessageType::kReady, "ready"},   {MessageType::kHeartbeat, "heartbeat"},
    {MessageType::kDone, "done"},     {MessageType::kFailed, "failed"},
    {MessageType::kTask, "task"},     {MessageType::kPack, "pack"},
    {MessageType::kShutdown, "shutdown"}, {MessageType::kUnusable, "unusable"},
};

// Field readers: each returns false and sets *err naming the field when it is absent or mistyped.
bool GetInt(const json& j, const char* key, int64_t lo, int64_t hi, int64_t* out, std::string* err) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) {
    *err = std::string("field '") + key + "' missing or not an integer";
    return false;
  }
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    *err = std::string("field '") + key + "' out of range";
    return false;
  }
  *out = v;
  return true;
}

bool GetU64(const json& j, const char* key, uint64_t* out, std::string* err) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) {
    *err = std::string("field '") + key + "' missing or not an unsigned integer";
    return false;
  }
  *out = it->get<uint64_t>();
  return true;
}

bool GetString(const json& j, const char* key, size_t max_len, std::string* out, std::string* err) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > max_len) {
    *err = std::string("field '") + key + "' missing, not a string or too long";
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

// Message readers: each reads its fields into *m and returns false with *err naming the field
// at fault (the field readers' contract).

// A heartbeat: pid, task, epoch, RSS, and the optional GPU reservation and task phase.
bool GetHeartbeat(const json& j, Message* m, std::string* err) {
  int64_t epoch = 0;
  bool ok = GetInt(j, "pid", 1, INT32_MAX, &m->pid, err) && GetString(j, "task_id", 256, &m->task_id, err) &&
            GetInt(j, "epoch", 0, 1 << 30, &epoch, err) && GetInt(j, "rss_kb", 0, INT64_MAX, &m->rss_kb, err) &&
            (!j.contains("gpu_reserved_kb") || GetInt(j, "gpu_reserved_kb", 0, INT64_MAX, &m->gpu_reserved_kb, err));
  m->epoch = static_cast<int>(epoch);
  if (ok && j.contains("phase")) {
    std::string phase;
    ok = GetString(j, "phase", 32, &phase, err);
    auto parsed = Parse<TaskPhase>(phase);
    if (ok && !parsed) {
      ok = false;
      *err = "field 'phase': unknown phase '" + phase + "'";
    }
    if (ok) m->phase = *parsed;
  }
  return ok;
}

// A finished task: pid, task and its metrics object.
bool GetDone(const json& j, Message* m, std::string* err) {
  bool ok = GetInt(j, "pid", 1, INT32_MAX, &m->pid, err) && GetString(j, "task_id", 256, &m->task_id, err);
  if (ok && !(j.contains("metrics") && j["metrics"].is_object())) {
    ok = false;
    *err = "field 'metrics' missing or not an object";
  }
  if (ok) m->metrics = j["metrics"];
  return ok;
}

// A failed task: pid, task, the error and whether a retry could help.
bool GetFailed(const json& j, Message* m, std::string* err) {
  bool ok = GetInt(j, "pid", 1, INT32_MAX, &m->pid, err) && GetString(j, "task_id", 256, &m->task_id, err) &&
            GetString(j, "error", 4096, &m->error, err);
  if (ok && !(j.contains("permanent") && j["permanent"].is_boolean())) {
    ok = false;
    *err = "field 'permanent' missing or not a boolean";
  }
  if (ok) m->permanent = j["permanent"].get<bool>();
  return ok;
}

// The optional recycle request of a done or failed message, and its reason.
bool GetRecycle(const json& j, Message* m, std::string* err) {
  if (!j.contains("recycle")) return true;
  if (!j["recycle"].is_boolean()) {
    *err = "field 'recycle' not a boolean";
    return false;
  }
  m->recycle = j["recycle"].get<bool>();
  if (j.contains("recycle_reason")) return GetString(j, "recycle_reason", 512, &m->recycle_reason, err);
  return true;
}

}  // namespace

const char* MessageTypeName(MessageType t) {
  for (const auto& tn : kTypeNames)
    if (tn.type == t) return tn.name;
  return "?";
}

namespace {

// A task's fields but its member.
json TaskFieldsToJson(const TaskSpec& t) {
  json j{{"task_id", t.task_id}, {"round", t.round},         {"member_index", t.member_index},
              {"seed", t.seed},       {"generation", t.generation}, {"rows", t.rows},
              {"data_dir", t.data_dir}, {"out_dir", t.out_dir}, {"excluded_file", t.excluded_file},   {"attempt", t.attempt},
              {"threads", t.threads}, {"save_checkpoint", t.save_checkpoint},
              {"publish", t.publish}, {"classes", t.classes}};
  if (!t.warm_from.empty()) j["warm_from"] = t.warm_from;
  if (t.pack_results) j["pack_results"] = true;
  if (t.lane_predictions) j["lane_predictions"] = true;
  return j;
}

}  // namespace

json TaskToJson(const TaskSpec& t) {
  json j = TaskFieldsToJson(t);
  j["member"] = MemberToJson(t.member);
  return j;
}

namespace {

// A task's fields but its member.
Status TaskFieldsFromJson(const json& j, TaskSpec* out) {
  if (!j.is_object()) return Status::InvalidArgument("task: not an object");
  std::string err;
  int64_t round, index, attempt, threads;
  bool ok = GetString(j, "task_id", 256, &out->task_id, &err) &&
            GetInt(j, "round", 0, 1 << 30, &round, &err) &&
            GetInt(j, "member_index", 0, 1 << 30, &index, &err) && GetU64(j, "seed", &out->seed, &err) &&
            GetU64(j, "generation", &out->generation, &err) && GetU64(j, "rows", &out->rows, &err) &&
            GetString(j, "data_dir", 4096, &out->data_dir, &err) &&
            GetString(j, "out_dir", 4096, &out->out_dir, &err) &&
            GetString(j, "excluded_file", 4096, &out->excluded_file, &err) &&
            GetInt(j, "attempt", 1, 1 << 20, &attempt, &err) &&
            GetInt(j, "threads", 1, 1024, &threads, &err);
  if (!ok) return Status::InvalidArgument("task: " + err);
  out->round = static_cast<int>(round);
  out->member_index = static_cast<int>(index);
  out->attempt = static_cast<int>(attempt);
  out->threads = static_cast<int>(threads);
  auto save = j.find("save_checkpoint");
  if (save == j.end() || !save->is_boolean())
    return Status::InvalidArgument("task: field 'save_checkpoint' missing or not a boolean");
  out->save_checkpoint = save->get<bool>();
  auto publish = j.find("publish");
  if (publish != j.end() && !publish->is_boolean())
    return Status::InvalidArgument("task: field 'publish' is not a boolean");
  out->publish = publish == j.end() || publish->get<bool>();
  int64_t classes = 0;
  if (j.contains("classes") && !GetInt(j, "classes", 0, static_cast<int64_t>(kMaxClasses), &classes, &err))
    return Status::InvalidArgument("task: " + err);
  if (classes == 1) return Status::InvalidArgument("task: field 'classes' is 1 (0 for regression, else >= 2)");
  out->classes = static_cast<int>(classes);
  auto packed = j.find("pack_results");
  if (packed != j.end() && !packed->is_boolean())
    return Status::InvalidArgument("task: field 'pack_results' is not a boolean");
  out->pack_results = packed != j.end() && packed->get<bool>();
  auto lane = j.find("lane_predictions");
  if (lane != j.end() && !lane->is_boolean())
    return Status::InvalidArgument("task: field 'lane_predictions' is not a boolean");
  out->lane_predictions = lane != j.end() && lane->get<bool>();
  out->warm_from.clear();
  if (j.contains("warm_from") && !GetString(j, "warm_from", 4096, &out->warm_from, &err))
    return Status::InvalidArgument("task: " + err);
  return Status::Ok();
}

}  // namespace

Status TaskFromJson(const json& j, TaskSpec* out) {
  Status fields = TaskFieldsFromJson(j, out);
  if (!fields.ok()) return fields;
  auto it = j.find("member");
  if (it == j.end()) return Status::InvalidArgument("task: field 'member' missing");
  Status s = MemberFromJson(*it, &out->member);
  if (!s.ok()) return Status::InvalidArgument("task: member: " + s.message());
  return Status::Ok();
}

void SetMemberRecordTask(const TaskSpec& t, json* record) {
  json task = TaskToJson(t);
  (*record)["spec"] = std::move(task["member"]);
  task.erase("member");
  (*record)["task"] = std::move(task);
}

Status TaskOfMemberRecord(const json& record, TaskSpec* out) {
  auto task = record.find("task");
  if (task == record.end() || !task->is_object()) return Status::InvalidArgument("task: missing or not an object");
  if (task->contains("member")) return TaskFromJson(*task, out);
  auto spec = record.find("spec");
  if (spec == record.end()) return Status::InvalidArgument("spec: missing (the task's member)");
  json whole = *task;
  whole["member"] = *spec;
  return TaskFromJson(whole, out);
}

std::string PackFileText(const std::vector<TaskSpec>& tasks) {
  // A pack's members share a handful of specs (often one): each is written once, without its
  // name, and a task names its member and the spec's place. The key is the spec's own text, so
  // two specs are shared exactly when they would be written the same.
  json specs = json::array(), arr = json::array();
  std::unordered_map<std::string, size_t> spec_of;
  for (const auto& t : tasks) {
    json member = MemberToJson(t.member);
    member.erase("name");
    std::string key = member.dump();
    auto [at, fresh] = spec_of.emplace(std::move(key), specs.size());
    if (fresh) specs.push_back(std::move(member));
    json task = TaskFieldsToJson(t);
    task["member_name"] = t.member.name;
    task["member_spec"] = at->second;
    arr.push_back(std::move(task));
  }
  // Moved in, not copied: json{{"tasks", arr}} copies every task (an initializer list holds
  // copies), ~40 % of this function's time for a pack of thousands.
  json file = json::object();
  file["specs"] = std::move(specs);
  file["tasks"] = std::move(arr);
  return file.dump();
}

StatusOr<std::vector<TaskSpec>> ParsePackFile(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tasks") || !j["tasks"].is_array() || j["tasks"].empty())
    return Status::InvalidArgument(path + ": not a pack file (expected {\"tasks\": [...]})");
  // Each shared spec is validated once (MemberFromJson), then copied into its tasks.
  std::vector<MemberSpec> specs;
  if (auto s = j.find("specs"); s != j.end()) {
    if (!s->is_array()) return Status::InvalidArgument(path + ": /specs: not an array");
    specs.resize(s->size());
    for (size_t i = 0; i < specs.size(); ++i) {
      Status st = MemberFromJson((*s)[i], &specs[i]);
      if (!st.ok()) return Status::InvalidArgument(path + ": /specs/" + std::to_string(i) + ": " + st.message());
    }
  }
  std::vector<TaskSpec> out(j["tasks"].size());
  for (size_t i = 0; i < out.size(); ++i) {
    const json& t = j["tasks"][i];
    const std::string where = path + ": /tasks/" + std::to_string(i) + ": ";
    if (t.is_object() && t.contains("member")) {  // a task with its own member (as before 2026-12-07)
      Status s = TaskFromJson(t, &out[i]);
      if (!s.ok()) return Status::InvalidArgument(where + s.message());
      continue;
    }
    Status s = TaskFieldsFromJson(t, &out[i]);
    if (!s.ok()) return Status::InvalidArgument(where + s.message());
    auto spec = t.find("member_spec");
    auto name = t.find("member_name");
    if (spec == t.end() || !spec->is_number_unsigned() || spec->get<uint64_t>() >= specs.size())
      return Status::InvalidArgument(where + "field 'member_spec' missing or not an index of /specs (" +
                                     std::to_string(specs.size()) + " specs)");
    if (name == t.end() || !name->is_string() || !config_detail::IsSafeName(name->get_ref<const std::string&>()))
      return Status::InvalidArgument(where + "field 'member_name' missing, or not 1-64 characters of [A-Za-z0-9_.-] "
                                     "not starting with '.'");
    out[i].member = specs[spec->get<uint64_t>()];
    out[i].member.name = name->get<std::string>();
  }
  return out;
}

std::string EncodeMessage(const Message& m) {
  json j{{"v", kProtocolVersion}, {"type", MessageTypeName(m.type)}, {"slot", m.slot}};
  switch (m.type) {
    case MessageType::kReady:
      j["pid"] = m.pid;
      if (m.rss_kb > 0) j["rss_kb"] = m.rss_kb;
      break;
    case MessageType::kHeartbeat:
      j.update({{"pid", m.pid}, {"task_id", m.task_id}, {"epoch", m.epoch}, {"rss_kb", m.rss_kb},
                {"phase", std::string(Name(m.phase))}});
      if (m.gpu_reserved_kb > 0) j["gpu_reserved_kb"] = m.gpu_reserved_kb;
      break;
    case MessageType::kDone:
      j.update({{"pid", m.pid}, {"task_id", m.task_id},
                {"metrics", m.metrics.is_object() ? m.metrics : json::object()}});
      break;
    case MessageType::kFailed:
      j.update({{"pid", m.pid}, {"task_id", m.task_id}, {"error", m.error}, {"permanent", m.permanent}});
      break;
    case MessageType::kTask: j["task"] = TaskToJson(m.task); break;
    case MessageType::kPack: j["pack_file"] = m.pack_file; break;
    case MessageType::kShutdown: break;
    case MessageType::kUnusable: j.update({{"pid", m.pid}, {"error", m.error}}); break;
  }
  if ((m.type == MessageType::kDone || m.type == MessageType::kFailed) && m.recycle) {
    j["recycle"] = true;
    j["recycle_reason"] = m.recycle_reason;
  }
  // Text from errors may hold a cut UTF-8 sequence: replace it rather than throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<Message> DecodeMessage(std::string_view bytes) {
  if (bytes.size() > kMaxMessageBytes)
    return Status::InvalidArgument("message of " + std::to_string(bytes.size()) + " bytes exceeds " +
                                   std::to_string(kMaxMessageBytes));
  json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("message is not a JSON object");
  std::string err;
  int64_t version = 0, slot = 0;
  if (!GetInt(j, "v", 0, 1 << 20, &version, &err)) return Status::InvalidArgument("message: " + err);
  if (version != kProtocolVersion)
    return Status::InvalidArgument("message: protocol version " + std::to_string(version) +
                                   ", expected " + std::to_string(kProtocolVersion));
  std::string type;
  if (!GetString(j, "type", 32, &type, &err) || !GetInt(j, "slot", 0, 1 << 16, &slot, &err))
    return Status::InvalidArgument("message: " + err);
  Message m;
  m.slot = static_cast<int>(slot);
  bool known = false;
  for (const auto& tn : kTypeNames) {
    if (type == tn.name) {
      m.type = tn.type;
      known = true;
    }
  }
  if (!known) return Status::InvalidArgument("message: unknown type '" + type + "'");
  bool ok = true;
  switch (m.type) {
    case MessageType::kReady:
      ok = GetInt(j, "pid", 1, INT32_MAX, &m.pid, &err) &&
           (!j.contains("rss_kb") || GetInt(j, "rss_kb", 0, INT64_MAX, &m.rss_kb, &err));
      break;
    case MessageType::kHeartbeat: ok = GetHeartbeat(j, &m, &err); break;
    case MessageType::kDone: ok = GetDone(j, &m, &err); break;
    case MessageType::kFailed: ok = GetFailed(j, &m, &err); break;
    case MessageType::kTask: {
      if (!j.contains("task")) return Status::InvalidArgument("message: field 'task' missing");
      Status s = TaskFromJson(j["task"], &m.task);
      if (!s.ok()) return Status::InvalidArgument("message: " + s.message());
      break;
    }
    case MessageType::kPack: ok = GetString(j, "pack_file", 4096, &m.pack_file, &err); break;
    case MessageType::kShutdown: break;
    case MessageType::kUnusable:
      ok = GetInt(j, "pid", 1, INT32_MAX, &m.pid, &err) && GetString(j, "error", 4096, &m.error, &err);
      break;
  }
  if (ok && (m.type == MessageType::kDone || m.type == MessageType::kFailed)) ok = GetRecycle(j, &m, &err);
  if (!ok) return Status::InvalidArgument("message '" + type + "': " + err);
  return m;
}

}  // namespace ens
