// libFuzzer target: the wire protocol (common/ipc/protocol.h) on arbitrary bytes.
//
// DecodeMessage must accept or reject every input without a crash. A message it accepts
// must survive the trip the supervisor and workers make with it: encoding it gives bytes
// that decode again, and encoding that result gives the same bytes (the encoding is a
// fixed point after one normalisation).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/ipc/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ens::StatusOr<ens::Message> first = ens::DecodeMessage(bytes);
  if (!first.ok()) return 0;
  const std::string encoded = ens::EncodeMessage(first.value());
  ens::StatusOr<ens::Message> second = ens::DecodeMessage(encoded);
  if (!second.ok()) __builtin_trap();  // we wrote something we refuse to read
  if (ens::EncodeMessage(second.value()) != encoded) __builtin_trap();
  return 0;
}
