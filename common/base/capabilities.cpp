#include "common/base/capabilities.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace ens {
namespace {

bool Get(__user_cap_data_struct data[2]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return ::syscall(SYS_capget, &header, data) == 0;
}

const char* CapName(int cap) {
  switch (cap) {
    case CAP_SETUID: return "CAP_SETUID";
    case CAP_SETGID: return "CAP_SETGID";
    case CAP_CHOWN: return "CAP_CHOWN";
    case CAP_DAC_READ_SEARCH: return "CAP_DAC_READ_SEARCH";
    case CAP_KILL: return "CAP_KILL";
    case CAP_DAC_OVERRIDE: return "CAP_DAC_OVERRIDE";
    case CAP_FOWNER: return "CAP_FOWNER";
    case CAP_SETPCAP: return "CAP_SETPCAP";
    default: return "CAP_?";
  }
}

}  // namespace

bool HasEffectiveCapability(int cap) {
  __user_cap_data_struct data[2] = {};
  if (cap < 0 || cap >= 64 || !Get(data)) return false;
  return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

std::vector<std::string> MissingCapabilities(const std::vector<int>& caps) {
  std::vector<std::string> missing;
  for (int cap : caps)
    if (!HasEffectiveCapability(cap)) missing.push_back(CapName(cap));
  return missing;
}

int DropAllCapabilitiesRaw() {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  if (::syscall(SYS_capset, &header, none) != 0) return errno;
  return 0;
}

int HardenChildRaw(bool* bounding_dropped) {
  bool dropped = false;
  if (HasEffectiveCapability(CAP_SETPCAP)) {
    for (int cap = 0; cap < 64; ++cap) {
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
      if (errno == EINVAL) break;  // past the kernel's last capability
      return errno;
    }
    dropped = true;
  }
  if (bounding_dropped != nullptr) *bounding_dropped = dropped;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return 0;
}

Status DropAllCapabilities() {
  if (int err = DropAllCapabilitiesRaw(); err != 0) return Status::FromErrno("dropping capabilities", err);
  return Status::Ok();
}

}  // namespace ens
