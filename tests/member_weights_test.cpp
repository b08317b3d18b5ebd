// Tests of common/state/member_weights.h: a member's weights file reads back to what was written
// (spec text, source, tensor names, shapes and float bits), is told from a TorchScript archive
// by its magic, and anything cut short, padded or damaged is Corruption naming the file.
#include "common/state/member_weights.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace ens {
namespace {

MemberWeights Sample() {
  MemberWeights w;
  w.spec_json = R"({"name":"m007","layers":[{"units":6}]})";
  w.source = "def forward(self, x):\n    return x\n";
  w.tensors.push_back({"layer0_weight", {6, 9}, std::vector<float>(54)});
  for (size_t i = 0; i < 54; ++i) w.tensors[0].values[i] = static_cast<float>(i) * 0.125f - 3.0f;
  w.tensors.push_back({"layer0_bias", {6}, {-0.0f, 1e-40f, std::numeric_limits<float>::quiet_NaN(), 1, 2, 3}});
  w.tensors.push_back({"y_std", {1}, {0.5f}});
  w.tensors.push_back({"empty", {0}, {}});
  return w;
}

TEST_CASE("a weights file reads back bit for bit", "[member_weights]") {
  const MemberWeights w = Sample();
  const std::string bytes = MemberWeightsBytes(w);
  CHECK(LooksLikeMemberWeights(bytes));
  auto back = ParseMemberWeights(bytes, "m007/weights.bin");
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  CHECK(back->spec_json == w.spec_json);
  CHECK(back->source == w.source);
  REQUIRE(back->tensors.size() == w.tensors.size());
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    INFO(w.tensors[i].name);
    CHECK(back->tensors[i].name == w.tensors[i].name);
    CHECK(back->tensors[i].shape == w.tensors[i].shape);
    REQUIRE(back->tensors[i].values.size() == w.tensors[i].values.size());
    // Bitwise: -0, a denormal and a NaN come back as they went.
    CHECK(std::memcmp(back->tensors[i].values.data(), w.tensors[i].values.data(),
                      w.tensors[i].values.size() * sizeof(float)) == 0);
  }
  CHECK(MemberWeightsBytes(*back) == bytes);  // one member, one byte sequence
}

// The header is written by hand (the source escaped once per pack): it must stay the JSON
// object json's own dump() writes, whichever source came before, so files written before and
// after the change are the same bytes.
TEST_CASE("a weights file's header is json's dump of spec, source and tensors, whatever source came before",
          "[member_weights]") {
  MemberWeights a = Sample(), b = Sample();
  b.source = "def forward(self, x):\n    return x * \"2\"\t\\\n";
  b.spec_json = R"({"name":"m008","layers":[{"units":6}]})";
  for (const MemberWeights* w : {&a, &b, &a, &a, &b}) {
    const std::string bytes = MemberWeightsBytes(*w);
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + 8, sizeof(length));
    nlohmann::json tensors = nlohmann::json::array();
    for (const StoredTensor& t : w->tensors) tensors.push_back({{"name", t.name}, {"shape", t.shape}});
    const std::string expected = nlohmann::json{{"spec", w->spec_json}, {"source", w->source}, {"tensors", tensors}}.dump();
    CHECK(bytes.substr(16, length) == expected);
    auto back = ParseMemberWeights(bytes, "weights.bin");
    REQUIRE(back.ok());
    CHECK(back->source == w->source);
    CHECK(back->spec_json == w->spec_json);
  }
}

TEST_CASE("a TorchScript archive or any other file is not a weights file", "[member_weights]") {
  CHECK_FALSE(LooksLikeMemberWeights(std::string("PK\x03\x04", 4) + std::string(100, 'x')));
  CHECK_FALSE(LooksLikeMemberWeights(""));
  auto r = ParseMemberWeights("PK\x03\x04 a zip", "dir/checkpoint.pt");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kCorruption);
  CHECK(r.status().message().find("dir/checkpoint.pt") != std::string::npos);
}

TEST_CASE("a weights file cut short, with bytes after its tensors or a damaged header is Corruption",
          "[member_weights]") {
  const std::string bytes = MemberWeightsBytes(Sample());
  std::vector<std::string> bad;
  for (size_t cut : {size_t{8}, size_t{15}, size_t{40}, bytes.size() / 2, bytes.size() - 4, bytes.size() - 1})
    bad.push_back(bytes.substr(0, cut));
  bad.push_back(bytes + "x");
  std::string huge_header = bytes;
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(&huge_header[8], &huge, sizeof(huge));
  bad.push_back(huge_header);
  std::string not_json = bytes;
  not_json[16] = '[';
  bad.push_back(not_json);
  for (const std::string& b : bad) {
    INFO("size " << b.size());
    auto r = ParseMemberWeights(b, "w.bin");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Status::Code::kCorruption);
    CHECK(r.status().message().find("w.bin") != std::string::npos);
  }
}

}  // namespace
}  // namespace ens
