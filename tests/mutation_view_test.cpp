// MutationView: the row-id files a `command` mutation is handed, and where its "run" object
// and ENSEMBLED_* variables point.
#include "orchestrator/run/mutation_view.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/base/atomic_file.h"
#include "common/state/pack_results.h"
#include "support/npy_ids.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::ReadInt64Npy;
using ens::testing::TempDir;

TEST_CASE("the view lists the rows trained on net of drops, the unused pool rows and every path") {
  TempDir d;
  const std::vector<uint64_t> dropped = {1, 3, 4};
  const std::vector<bool> pool_used = {true, false, false, true, false};
  MutationViewInputs in;
  in.state_dir = d.path();
  in.round_dir = d.path() + "/rounds/r0002";
  in.data_dir = d.path() + "/data";
  in.round = 2;
  in.generation = 2;
  in.table_rows = 7;
  in.features = 3;
  in.feature_names = {"a", "b", "c"};
  in.dropped = &dropped;
  in.pool_used = &pool_used;
  in.member_names = {"m000", "m001"};
  in.member_dirs = {in.round_dir + "/members/m000", in.round_dir + "/members/m001"};
  // m000 has its own directory; m001's files are the second span of its pack's (pack_results.h).
  REQUIRE(MakeDirs(in.member_dirs[0]).ok());
  REQUIRE(WriteFileAtomic(in.member_dirs[0] + "/holdout_pred.f32", std::string(8, 'h')).ok());
  REQUIRE(WriteFileAtomic(in.member_dirs[0] + "/pool_pred.f32", std::string(12, 'p')).ok());
  PackResultsWriter pack(in.round_dir + "/packs/r2-m005-a1");
  REQUIRE(pack.Begin().ok());
  for (const char* m : {"m005", "m001"}) {
    REQUIRE(pack.AddFiles(m, {{"holdout_pred.f32", std::string(8, 'h')}, {"pool_pred.f32", std::string(12, 'p')}}).ok());
    pack.SetRecord(m, nlohmann::json::object());
    pack.SetMetrics(m, nlohmann::json::object());
  }
  REQUIRE(pack.Finish().ok());
  REQUIRE(pack.Publish().ok());
  in.ctl_binary = "/opt/ensembled/bin/ensemblectl";
  auto v = WriteMutationView(in);
  INFO(v.status().ToString());
  REQUIRE(v.ok());
  CHECK(ReadInt64Npy(in.round_dir + "/mutation/train_row_ids.npy") == std::vector<int64_t>{0, 2, 5, 6});
  CHECK(ReadInt64Npy(in.round_dir + "/mutation/pool_unused_ids.npy") == std::vector<int64_t>{1, 2, 4});
  const nlohmann::json& run = v->run;
  CHECK(run["train_rows"] == 4);
  CHECK(run["dropped_rows"] == 3);
  CHECK(run["round"] == 2);
  CHECK(run["train_table"]["path"] == in.data_dir + "/train.bin");
  CHECK(run["train_table"]["header_bytes"] == 4096);
  CHECK(run["train_table"]["columns"] == 4);
  const nlohmann::json& own = run["members"][0];
  CHECK(own["pool_pred"] == in.round_dir + "/members/m000/pool_pred.f32");
  CHECK(own["pool_pred_file"] == own["pool_pred"]);
  CHECK(own["pool_pred_offset"] == 0);
  CHECK(own["pool_pred_count"] == 3);
  const nlohmann::json& packed = run["members"][1];
  CHECK_FALSE(packed.contains("pool_pred"));  // no whole file of its own: a script reading one fails loudly
  CHECK(packed["pool_pred_file"] == in.round_dir + "/packs/r2-m005-a1/pool_pred.f32");
  CHECK(packed["pool_pred_offset"] == 12);
  CHECK(packed["pool_pred_count"] == 3);
  CHECK(packed["holdout_pred_offset"] == 8);
  CHECK(packed["holdout_pred_count"] == 2);
  CHECK(run["feature_names"] == nlohmann::json({"a", "b", "c"}));
  std::map<std::string, std::string> env(v->env.begin(), v->env.end());
  CHECK(env["ENSEMBLED_ROUND"] == "2");
  CHECK(env["ENSEMBLED_TRAIN_ROW_IDS"] == in.round_dir + "/mutation/train_row_ids.npy");
  CHECK(env["ENSEMBLED_POOL_X"] == in.data_dir + "/pool_x.npy");
  CHECK(env["ENSEMBLED_CTL"] == in.ctl_binary);
}

TEST_CASE("a view that cannot be written is an error naming the place") {
  const std::vector<uint64_t> none;
  const std::vector<bool> pool;
  MutationViewInputs in;
  in.round_dir = "/proc/no-such-place/r0000";
  in.dropped = &none;
  in.pool_used = &pool;
  auto v = WriteMutationView(in);
  REQUIRE_FALSE(v.ok());
  CHECK(v.status().message().find("/proc/no-such-place") != std::string::npos);
}

}  // namespace
}  // namespace ens
