// Seed derivation: a member's seeds are a stable function of (run seed, member index, round).
//
// splitmix64 (Steele, Lea, Flood 2014) mixing; never std::hash, never time. The streams
// give independent seeds for each generator a task uses. Pure functions. Thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace ens {

// One splitmix64 step on x: the output for state x.
inline uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The seed of member `member_index` in `round`.
uint64_t MemberSeed(uint64_t run_seed, uint64_t member_index, uint64_t round);

// Which generator a sub-seed is for; values are part of the on-disk reproducibility contract.
enum class SeedStream : uint64_t { kInit = 1, kDropout = 2, kShuffle = 3, kSplit = 4, kData = 5 };
uint64_t StreamSeed(uint64_t member_seed, SeedStream stream);

// A bound n > 0 for SeededRng::Below with floor((2^64 - 1) / n), made once for many draws.
struct DrawBound {
  uint64_t n = 1, reciprocal = UINT64_MAX;
  static DrawBound Of(uint64_t n) { return {n, UINT64_MAX / n}; }
};

// The bounds a Fisher-Yates shuffle of `size` elements draws below, indexed by the bound:
// element i is DrawBound::Of(i) (element 0 unused). Shared by every member of a pack.
std::vector<DrawBound> ShuffleBounds(uint64_t size);

// A tiny deterministic generator (splitmix64 sequence) for shuffles, splits and synthetic data.
class SeededRng {
 public:
  explicit SeededRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    const uint64_t out = SplitMix64(state_);
    state_ += 0x9E3779B97F4A7C15ULL;
    return out;
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform();
  // Uniform integer in [0, n): the first Next() v below UINT64_MAX - UINT64_MAX % n (the
  // largest multiple of n the range holds), taken mod n. REQUIRES: n > 0. Unbiased.
  uint64_t Below(uint64_t n) { return Below(DrawBound::Of(n)); }
  // The same draw with n's reciprocal made beforehand: no division (an epoch's shuffle draws
  // once a training row and member, each member with the same bounds: ShuffleBounds).
  uint64_t Below(const DrawBound& b) {
    for (;;) {
      const uint64_t v = Next();
      // v / n is the high word of v * reciprocal or one more (reciprocal >= 2^64 / n - 1), so
      // v - that * n is v mod n or v mod n + n (< 2^64: it is at most v).
      uint64_t r = v - static_cast<uint64_t>((static_cast<unsigned __int128>(v) * b.reciprocal) >> 64) * b.n;
      if (r >= b.n) r -= b.n;
      // v < UINT64_MAX - UINT64_MAX % n, as ~v > UINT64_MAX % n = UINT64_MAX - reciprocal * n.
      if (~v > UINT64_MAX - b.reciprocal * b.n) return r;
    }
  }
  // Standard normal (Box-Muller, no cached second value).
  double Normal();

 private:
  uint64_t state_;
};

}  // namespace ens
