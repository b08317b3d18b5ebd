#include "common/state/member_weights.h"

#include <cstring>

#include <nlohmann/json.hpp>

namespace ens {
namespace {

constexpr char kMagic[8] = {'E', 'N', 'S', 'W', 'G', 'T', '0', '1'};
constexpr size_t kPrefix = sizeof(kMagic) + sizeof(uint64_t);
// Bounds a corrupt file cannot pass: a header larger than this, or a shape with more values
// than the file holds, is refused before anything is allocated for it.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 26;

}  // namespace

bool LooksLikeMemberWeights(const std::string& bytes) {
  return bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0;
}

std::string MemberWeightsBytes(const MemberWeights& weights) {
  nlohmann::json tensors = nlohmann::json::array();
  size_t floats = 0;
  for (const StoredTensor& t : weights.tensors) {
    tensors.push_back({{"name", t.name}, {"shape", t.shape}});
    floats += t.values.size();
  }
  // The header is the object {"source", "spec", "tensors"} as json's dump() writes it (keys
  // sorted), spelled out so that the source, the same for every member of a pack, is escaped
  // once per thread and source rather than once per member.
  thread_local std::string last_source, last_source_json;
  if (last_source_json.empty() || last_source != weights.source) {
    last_source = weights.source;
    last_source_json = nlohmann::json(weights.source).dump();
  }
  const std::string header = "{\"source\":" + last_source_json + ",\"spec\":" + nlohmann::json(weights.spec_json).dump() +
                             ",\"tensors\":" + tensors.dump() + "}";
  const uint64_t length = header.size();
  std::string out;
  out.reserve(kPrefix + header.size() + floats * sizeof(float));
  out.append(kMagic, sizeof(kMagic));
  out.append(reinterpret_cast<const char*>(&length), sizeof(length));
  out += header;
  for (const StoredTensor& t : weights.tensors)
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  return out;
}

StatusOr<MemberWeights> ParseMemberWeights(const std::string& bytes, const std::string& path) {
  auto corrupt = [&](const std::string& why) { return Status::Corruption(path + ": not a member weights file: " + why); };
  if (!LooksLikeMemberWeights(bytes)) return corrupt("no magic");
  if (bytes.size() < kPrefix) return corrupt("cut short");
  uint64_t length = 0;
  std::memcpy(&length, bytes.data() + sizeof(kMagic), sizeof(length));
  if (length > kMaxHeaderBytes || length > bytes.size() - kPrefix) return corrupt("header length " + std::to_string(length));
  const nlohmann::json header = nlohmann::json::parse(bytes.begin() + kPrefix, bytes.begin() + static_cast<int64_t>(kPrefix + length),
                                                      nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains("spec") || !header["spec"].is_string() || !header.contains("source") ||
      !header["source"].is_string() || !header.contains("tensors") || !header["tensors"].is_array())
    return corrupt("bad header");
  MemberWeights w;
  w.spec_json = header["spec"].get<std::string>();
  w.source = header["source"].get<std::string>();
  size_t at = kPrefix + length;
  for (const nlohmann::json& t : header["tensors"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("shape") || !t["shape"].is_array())
      return corrupt("bad tensor entry");
    StoredTensor st;
    st.name = t["name"].get<std::string>();
    uint64_t count = 1;
    for (const nlohmann::json& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return corrupt("tensor " + st.name + ": bad shape");
      st.shape.push_back(d.get<int64_t>());
      count *= static_cast<uint64_t>(st.shape.back());
      if (count > (bytes.size() - at) / sizeof(float)) return corrupt("tensor " + st.name + ": cut short");
    }
    st.values.resize(count);
    std::memcpy(st.values.data(), bytes.data() + at, count * sizeof(float));
    at += count * sizeof(float);
    w.tensors.push_back(std::move(st));
  }
  if (at != bytes.size()) return corrupt(std::to_string(bytes.size() - at) + " bytes after the last tensor");
  return w;
}

}  // namespace ens
