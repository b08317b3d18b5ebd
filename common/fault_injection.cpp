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

bool NonFiniteLossRequested(const std::string& task_id) {
  const char* spec = std::getenv("ENSEMBLED_TEST_NONFINITE");
  if (spec == nullptr || task_id.empty()) return false;
  std::string list = std::string(",") + spec + ",";
  return list.find("," + task_id + ",") != std::string::npos;
}

}  // namespace ens
