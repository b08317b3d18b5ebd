#include "common/base/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/base/atomic_file.h"
#include "common/base/env.h"
#include "common/base/env_vars.h"

namespace ens {
namespace {

// Whether `item` is one of the comma-separated entries of environment variable `var`.
bool Listed(EnvVar var, const std::string& item) {
  const char* spec = EnvVarValue(var);
  if (spec == nullptr || item.empty()) return false;
  std::string list = std::string(",") + spec + ",";
  return list.find("," + item + ",") != std::string::npos;
}

bool Above(EnvVar var, size_t n) {
  const char* limit = EnvVarValue(var);
  return limit != nullptr && n > std::strtoull(limit, nullptr, 10);
}

std::string ReplaceAll(std::string m, const std::string& from, const std::string& to) {
  for (size_t at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size())) m.replace(at, from.size(), to);
  return m;
}

class Environment final : public Faults {
 public:
  bool CrashAt(const char* point, int nth) override {
    const char* spec = EnvVarValue(EnvVar::kCrashAt);
    if (spec == nullptr) return false;
    std::string s(spec);
    int want = 1;
    if (auto colon = s.find(':'); colon != std::string::npos) {
      want = std::atoi(s.c_str() + colon + 1);
      s.resize(colon);
    }
    return s == point && nth == want;
  }
  bool NonFiniteLoss(const std::string& task_id) override { return Listed(EnvVar::kTestNonFinite, task_id); }
  bool WriteFailure(const std::string& task_id, int attempt) override {
    return Listed(EnvVar::kTestFailWrite, task_id + ":" + std::to_string(attempt));
  }
  bool OutOfMemory(size_t pack_size) override { return Above(EnvVar::kTestOomAbove, pack_size); }
  bool KillForSize(size_t pack_size) override { return Above(EnvVar::kTestSigkillAbove, pack_size); }
  bool TorchError(const std::string& task_id) override { return Listed(EnvVar::kTestTorchError, task_id); }
  int SlowPhaseMs(std::string_view phase) override {
    const char* spec = EnvVarValue(EnvVar::kTestSlowPhase);
    if (spec == nullptr) return 0;
    std::string_view s(spec);
    auto colon = s.find(':');
    if (colon == std::string_view::npos || s.substr(0, colon) != phase) return 0;
    return std::atoi(spec + colon + 1);
  }
  bool Hang(const std::string& task_id, int attempt, std::string_view phase) override {
    const char* spec = EnvVarValue(EnvVar::kTestHang);
    std::string want = task_id + ":" + std::to_string(attempt);
    if (!phase.empty()) want += ":" + std::string(phase);
    return spec != nullptr && want == spec;
  }
  std::vector<std::string> RawMessages(const std::string& task_id, int attempt, int slot, long pid) override {
    const char* spec = EnvVarValue(EnvVar::kTestSendRaw);
    if (spec == nullptr || attempt != 1) return {};
    std::string_view s(spec);
    auto colon = s.find(':');
    if (colon == std::string_view::npos || s.substr(0, colon) != task_id) return {};
    auto text = ReadFile(std::string(s.substr(colon + 1)));
    auto list = nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
    std::vector<std::string> out;
    if (!list.is_array()) return out;
    for (const auto& m : list)
      if (m.is_string())
        out.push_back(ReplaceAll(ReplaceAll(m.get<std::string>(), "@SLOT@", std::to_string(slot)), "@PID@",
                                 std::to_string(pid)));
    return out;
  }
  bool JournalWriteFails(const std::string& event) override { return Listed(EnvVar::kTestFailJournal, event); }
  std::optional<std::string> CudaSees() override {
    const char* fake = EnvVarValue(EnvVar::kTestCudaSees);
    if (fake == nullptr) return std::nullopt;
    return std::string(fake);
  }
};

Faults& Active() { return CurrentEnv().faults(); }

}  // namespace

Faults& EnvironmentFaults() {
  static Environment env;
  return env;
}

ScopedFaults::ScopedFaults(Faults* faults) : env_(&CurrentEnv(), faults), installed_(&env_) {}

void CrashPoint(const char* point) {
  if (&CurrentEnv() == Env::Default() && EnvVarValue(EnvVar::kCrashAt) == nullptr) return;  // production: one getenv
  static std::map<std::string, int> hits;
  if (Active().CrashAt(point, ++hits[point])) ::kill(::getpid(), SIGKILL);
}

bool NonFiniteLossRequested(const std::string& task_id) { return Active().NonFiniteLoss(task_id); }
bool WriteFailureRequested(const std::string& task_id, int attempt) { return Active().WriteFailure(task_id, attempt); }
bool OutOfMemoryRequested(size_t pack_size) { return Active().OutOfMemory(pack_size); }

void KillIfTooBig(size_t pack_size) {
  if (Active().KillForSize(pack_size)) ::kill(::getpid(), SIGKILL);
}

bool TorchErrorRequested(const std::string& task_id) { return Active().TorchError(task_id); }

void SlowPhaseIfTold(std::string_view phase) {
  if (int ms = Active().SlowPhaseMs(phase); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void HangIfTold(const std::string& task_id, int attempt, std::string_view phase) {
  if (Active().Hang(task_id, attempt, phase))
    for (;;) ::pause();
}

std::vector<std::string> RawMessagesRequested(const std::string& task_id, int attempt, int slot, long pid) {
  return Active().RawMessages(task_id, attempt, slot, pid);
}

bool JournalWriteFailureRequested(const std::string& event) { return Active().JournalWriteFails(event); }

std::optional<std::string> CudaSeesRequested() { return Active().CudaSees(); }

}  // namespace ens
