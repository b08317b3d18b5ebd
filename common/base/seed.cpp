#include "common/base/seed.h"

#include <cmath>

namespace ens {

uint64_t MemberSeed(uint64_t run_seed, uint64_t member_index, uint64_t round) {
  uint64_t h = SplitMix64(run_seed);
  h = SplitMix64(h ^ SplitMix64(member_index + 0x1000));
  h = SplitMix64(h ^ SplitMix64(round + 0x2000000));
  return h;
}

uint64_t StreamSeed(uint64_t member_seed, SeedStream stream) {
  return SplitMix64(member_seed ^ SplitMix64(static_cast<uint64_t>(stream) * 0xA24BAED4963EE407ULL));
}

std::vector<DrawBound> ShuffleBounds(uint64_t size) {
  std::vector<DrawBound> out(size + 1);
  for (uint64_t i = 1; i <= size; ++i) out[i] = DrawBound::Of(i);
  return out;
}

double SeededRng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double SeededRng::Normal() {
  double u1 = Uniform();
  double u2 = Uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace ens
