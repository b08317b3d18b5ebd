// Test support: a pack of one member, "m0", written and published through PackResultsWriter
// (common/state/pack_results.h) as a worker does, and its weights read back as a reader finds
// them. Header-only; used by the disk-full and torn-write tests of the Env seam.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "common/base/atomic_file.h"
#include "common/state/pack_results.h"

namespace ens::testing {

// Writes a pack of one member whose weights are `weights` and publishes it at `pack`.
inline Status PublishOneMemberPack(const std::string& pack, const std::string& weights) {
  PackResultsWriter w(pack);
  Status s = w.Begin();
  if (s.ok()) s = w.AddFiles("m0", {{"weights.bin", weights}, {"holdout_pred.f32", std::string(16, 'h')}});
  if (!s.ok()) return s;
  w.SetRecord("m0", {{"member", "m0"}});
  w.SetMetrics("m0", {{"member", "m0"}, {"seconds", 1}});
  s = w.Finish();
  if (s.ok()) s = SyncFileSystem(w.tmp_dir());
  if (s.ok()) s = w.Publish();
  return s;
}

// The weights of m0 in the pack published at `pack`, as a reader finds them.
inline std::string PublishedWeights(const std::string& pack) {
  auto members = ReadPackRecords(pack);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 1);
  const PackSpan span = members->front().files.at("weights.bin");
  const std::string all = *ReadFile(pack + "/weights.bin");
  REQUIRE(span.offset + span.length <= all.size());
  return all.substr(span.offset, span.length);
}

}  // namespace ens::testing
