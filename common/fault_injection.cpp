#include "common/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

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

bool TorchErrorRequested(const std::string& task_id) { return Listed("ENSEMBLED_TEST_TORCH_ERROR", task_id); }

}  // namespace ens
