#include "orchestrator/gpu/gpu_share.h"

#include <algorithm>
#include <cstdio>

namespace ens {

std::string AllocatorConfWithFraction(const std::string& inherited, double fraction) {
  constexpr const char kKey[] = "per_process_memory_fraction";
  std::string out;
  size_t start = 0;
  while (start <= inherited.size()) {  // options are "key:value" separated by commas
    size_t comma = inherited.find(',', start);
    std::string option = inherited.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? inherited.size() + 1 : comma + 1;
    size_t first = option.find_first_not_of(' ');
    if (first == std::string::npos || option.compare(first, sizeof(kKey) - 1, kKey) == 0) continue;
    out += option + ",";
  }
  char value[64];
  std::snprintf(value, sizeof(value), "%s:%.9g", kKey, fraction);
  return out + value;
}

double WorkerReserveLimitMb(double configured_mb, double part_mb) {
  if (part_mb <= 0) return configured_mb;
  if (configured_mb <= 0) return part_mb;
  return std::min(configured_mb, part_mb);
}

}  // namespace ens
