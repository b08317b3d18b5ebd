#include "orchestrator/workers/legacy_queues.h"

#include <dirent.h>
#include <mqueue.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "common/base/env.h"

namespace ens {

namespace {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

// Every "/ens-<uid>-..." that a process visible here has open (an open queue's descriptor
// reads back as its name in /proc/<pid>/fd).
std::set<std::string> OpenQueueNames(const std::string& prefix) {
  std::set<std::string> open;
  for (const std::string& pid : ListDir("/proc")) {
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fd_dir = "/proc/" + pid + "/fd";
    for (const std::string& fd : ListDir(fd_dir)) {
      char target[512];
      ssize_t n = ::readlink((fd_dir + "/" + fd).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      std::string t(target, static_cast<size_t>(n));
      if (t.rfind(prefix, 0) == 0) open.insert(t);
    }
  }
  return open;
}

}  // namespace

LegacyQueueSweep ReclaimLegacyQueues(const std::string& mqueue_dir, std::chrono::seconds min_age) {
  LegacyQueueSweep sweep;
  const std::string prefix = "ens-" + std::to_string(::getuid()) + "-";
  std::vector<std::string> candidates;
  for (const std::string& n : ListDir(mqueue_dir))
    if (n.rfind(prefix, 0) == 0) candidates.push_back(n);
  if (candidates.empty()) return sweep;
  const std::set<std::string> open = OpenQueueNames("/" + prefix);
  const time_t now = static_cast<time_t>(WallSeconds());
  for (const std::string& n : candidates) {
    struct stat st {};
    if (::stat((mqueue_dir + "/" + n).c_str(), &st) != 0 || st.st_uid != ::getuid()) continue;
    if (open.count("/" + n) != 0) {
      ++sweep.in_use;
      continue;
    }
    if (now - std::max(st.st_mtime, st.st_ctime) < min_age.count()) {
      ++sweep.too_young;
      continue;
    }
    if (::mq_unlink(("/" + n).c_str()) == 0) sweep.removed.push_back("/" + n);
  }
  return sweep;
}

}  // namespace ens
