#include "common/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include <thread>

namespace ens {

void CrashPoint(const char* point) {
  const char* spec = std::getenv("ENSEMBLED_CRASH_AT");
  if (spec == nullptr) return;
  std::string s(spec);
  int nth = 1;
  if (auto colon = s.find(':'); colon != std::string::npos) {
    nth = std::atoi(s.c_str() + colon + 1);
    s.resize(colon);
  }
  if (s != point) return;
  static std::map<std::string, int> hits;
  if (++hits[s] == nth) ::kill(::getpid(), SIGKILL);
}

namespace {

// Whether `item` is one of the comma-separated entries of environment variable `var`.
bool Listed(const char* var, const std::string& item) {
  const char* spec = std::getenv(var);
  if (spec == nullptr || item.empty()) return false;
  std::string list = std::string(",") + spec + ",";
  return list.find("," + item + ",") != std::string::npos;
}

}  // namespace

bool NonFiniteLossRequested(const std::string& task_id) { return Listed("ENSEMBLED_TEST_NONFINITE", task_id); }

bool WriteFailureRequested(const std::string& task_id, int attempt) {
  return Listed("ENSEMBLED_TEST_FAIL_WRITE", task_id + ":" + std::to_string(attempt));
}

bool OutOfMemoryRequested(size_t pack_size) {
  const char* limit = std::getenv("ENSEMBLED_TEST_OOM_ABOVE");
  return limit != nullptr && pack_size > std::strtoull(limit, nullptr, 10);
}

void KillIfTooBig(size_t pack_size) {
  const char* limit = std::getenv("ENSEMBLED_TEST_SIGKILL_ABOVE");
  if (limit != nullptr && pack_size > std::strtoull(limit, nullptr, 10)) ::kill(::getpid(), SIGKILL);
}

bool TorchErrorRequested(const std::string& task_id) { return Listed("ENSEMBLED_TEST_TORCH_ERROR", task_id); }

void SlowPhaseIfTold(std::string_view phase) {
  const char* spec = std::getenv("ENSEMBLED_TEST_SLOW_PHASE");
  if (spec == nullptr) return;
  std::string_view s(spec);
  auto colon = s.find(':');
  if (colon == std::string_view::npos || s.substr(0, colon) != phase) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(spec + colon + 1)));
}

void HangIfTold(const std::string& task_id, int attempt, std::string_view phase) {
  const char* spec = std::getenv("ENSEMBLED_TEST_HANG");
  std::string want = task_id + ":" + std::to_string(attempt);
  if (!phase.empty()) want += ":" + std::string(phase);
  if (spec != nullptr && want == spec)
    for (;;) ::pause();
}

std::vector<std::string> RawMessagesRequested(const std::string& task_id, int attempt, int slot, long pid) {
  const char* spec = std::getenv("ENSEMBLED_TEST_SEND_RAW");
  if (spec == nullptr || attempt != 1) return {};
  std::string_view s(spec);
  auto colon = s.find(':');
  if (colon == std::string_view::npos || s.substr(0, colon) != task_id) return {};
  auto text = ReadFile(std::string(s.substr(colon + 1)));
  auto list = nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  auto replace = [](std::string m, const std::string& from, const std::string& to) {
    for (size_t at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size())) m.replace(at, from.size(), to);
    return m;
  };
  for (const auto& m : list)
    if (m.is_string())
      out.push_back(replace(replace(m.get<std::string>(), "@SLOT@", std::to_string(slot)), "@PID@", std::to_string(pid)));
  return out;
}

}  // namespace ens
