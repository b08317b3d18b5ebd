// Test support: the values of an int64 .npy file (the row-id files of a mutation's view),
// read with a header check. Header-only; needs Catch2's REQUIRE in scope.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/base/atomic_file.h"

namespace ens::testing {

inline std::vector<int64_t> ReadInt64Npy(const std::string& path) {
  auto bytes = ReadFile(path);
  REQUIRE(bytes.ok());
  REQUIRE(bytes->size() >= 10);
  const size_t header = 10 + (static_cast<unsigned char>((*bytes)[8]) | static_cast<unsigned char>((*bytes)[9]) << 8);
  REQUIRE(bytes->size() >= header);
  REQUIRE(bytes->substr(0, header).find("'descr': '<i8'") != std::string::npos);
  std::vector<int64_t> out((bytes->size() - header) / 8);
  std::memcpy(out.data(), bytes->data() + header, out.size() * 8);
  return out;
}

}  // namespace ens::testing
