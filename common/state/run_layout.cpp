#include "common/state/run_layout.h"

#include <sys/stat.h>

#include <cstdio>

#include "common/state/dataset_segment.h"
#include "common/state/member_view.h"
#include "common/base/seed.h"

namespace ens {

std::string RunLayout::ExcludedRows(const std::string& data_dir, uint64_t generation) {
  char name[64];
  std::snprintf(name, sizeof(name), "/excluded-g%04llu.u64", static_cast<unsigned long long>(generation));
  return data_dir + name;
}

std::string RunLayout::RoundDir(int round) const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "/rounds/r%04d", round);
  return root_ + buf;
}

std::string MemberFiles::StoredCheckpoint() const {
  return MemberFileExists(Weights()) ? Weights() : Checkpoint();
}

std::string RunIdFor(const std::string& absolute_state_dir) {
  uint64_t h = SplitMix64(Fnv1a64(absolute_state_dir.data(), absolute_state_dir.size(), kFnvOffset));
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%012llx", static_cast<unsigned long long>(h & 0xFFFFFFFFFFFFULL));
  return buf;
}

}  // namespace ens
