// Checkpoints people can use: `ensemblectl export --member` writes a member's TorchScript module
// (built then from its weights.bin) whose forward(x) takes raw feature rows and returns
// predictions in target units, and `ensemblectl export` writes one module returning (mean, std)
// over the members. Loaded with the venv's Python torch, both reproduce what the worker wrote,
// bit for bit.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/state/run_layout.h"
#include "support/member_files_py.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

// Reads the holdout segment, runs each member's checkpoint on its features and compares the
// bytes with holdout_pred.f32; then the export's (mean, std) with the members' own.
constexpr const char* kCheck = R"PY(
import struct, sys
import numpy as np
import torch
torch.set_num_threads(1)
state, export, modules = sys.argv[1], sys.argv[2], sys.argv[3]
raw = open(state + "/data/holdout.bin", "rb").read()
rows = struct.unpack_from("<Q", raw, 24)[0]
features = struct.unpack_from("<I", raw, 40)[0]
table = np.frombuffer(raw, dtype="<f4", count=rows * (features + 1), offset=4096).reshape(rows, features + 1)
x = torch.from_numpy(np.ascontiguousarray(table[:, :features]))
preds = []
for m in ("m000", "m001", "m002"):
    member = torch.jit.load(f"{modules}/{m}.pt")
    with torch.no_grad():
        p = member(x)
    want = np.frombuffer(member_bytes(f"{state}/rounds/r0001", m, "holdout_pred.f32"), dtype="<f4")
    if p.numpy().tobytes() != want.tobytes():
        sys.exit(f"{m}: forward differs from holdout_pred.f32 (max abs diff {np.abs(p.numpy() - want).max()})")
    preds.append(p)
ens = torch.jit.load(export)
with torch.no_grad():
    mean, std = ens(x)
stack = torch.stack(preds)
if not torch.equal(mean, stack.mean(0)) or not torch.equal(std, stack.std(0, unbiased=False)):
    sys.exit("export: (mean, std) differ from the members' own")
print("ok", rows, features)
)PY";

TEST_CASE("checkpoints and the export reproduce the worker's predictions from Python", "[checkpoint][export]") {
  TempDir tmp;
  WriteText(tmp / "run.json", R"({"run_name": "export", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 3,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 100, "holdout_rows": 150}},
    "members": {"defaults": {"epochs": 4, "layers": [{"units": 8, "activation": "gelu"}, {"units": 4, "activation": "swish"}]},
                "count": 3},
    "mutation": {"policy": "query_by_committee", "k": 10},
    "rounds": {"count": 2}})");
  auto run = Run({BinaryPath("ensembled"), "run", "--config", tmp / "run.json"}, tmp.path());
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  // The raw spread: what the members' own predictions give bit for bit (the calibrated std,
  // the default, is tests/calibrated_predict_test.cpp's).
  auto exp = Run({BinaryPath("ensemblectl"), "export", "--state-dir", tmp / "state", "-o", tmp / "ensemble.pt",
                  "--raw-sigma"},
                 tmp.path());
  INFO(exp.out << exp.err);
  REQUIRE(exp.code == 0);
  CHECK_THAT(exp.out, Catch::Contains("3 members of round 1"));
  for (const char* m : {"m000", "m001", "m002"}) {
    auto one = Run({BinaryPath("ensemblectl"), "export", "--state-dir", tmp / "state", "--member", m, "-o",
                    tmp / (std::string(m) + ".pt")},
                   tmp.path());
    INFO(one.out << one.err);
    REQUIRE(one.code == 0);
    CHECK_THAT(one.out, Catch::Contains(std::string("member ") + m + " of round 1"));
  }
  WriteText(tmp / "check.py", MemberFilesPy() + kCheck);
  auto py = Run({ENS_PYTHON, tmp / "check.py", tmp / "state", tmp / "ensemble.pt", tmp.path()}, tmp.path());
  INFO(py.out << py.err);
  CHECK(py.code == 0);
  CHECK_THAT(py.out, Catch::Contains("ok 150 10"));
}

TEST_CASE("export of a run without checkpoints or rounds says why", "[checkpoint][export]") {
  TempDir tmp;
  auto none = Run({BinaryPath("ensemblectl"), "export", "--state-dir", tmp / "nothing", "-o", tmp / "e.pt"}, tmp.path());
  CHECK(none.code != 0);
  CHECK_THAT(none.err, Catch::Contains("nothing"));
  WriteText(tmp / "run.json", R"({"run_name": "nockpt", "state_dir": ")" + tmp / "state" + R"(", "save_checkpoints": false,
    "resources": {"gpus": "none", "cpu_workers": 1},
    "data": {"synthetic": {"initial_rows": 100, "pool_rows": 0, "holdout_rows": 50}},
    "members": {"defaults": {"epochs": 2, "layers": [{"units": 4}]}, "count": 2}})");
  auto run = Run({BinaryPath("ensembled"), "run", "--config", tmp / "run.json"}, tmp.path());
  REQUIRE(run.code == 0);
  auto exp = Run({BinaryPath("ensemblectl"), "export", "--state-dir", tmp / "state", "-o", tmp / "e.pt"}, tmp.path());
  CHECK(exp.code != 0);
  CHECK_THAT(exp.err, Catch::Contains("save_checkpoints"));
}

// A state directory written before weights.bin (2026-12-06) holds each member's module as
// checkpoint.pt, in its own directory (results_layout "members"). Made here from a fresh run: each member's weights.bin replaced by the module
// `ensemble-worker member-module` builds from it (what the worker saved then). Predict, export,
// export --member and verify read it, and give the bytes they give on the new layout.
TEST_CASE("a state directory of the earlier layout, a module per member, predicts, exports and verifies the same",
          "[checkpoint][export]") {
  TempDir tmp;
  WriteText(tmp / "run.json", R"({"run_name": "layout", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 1},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 30, "holdout_rows": 40}},
    "members": {"defaults": {"epochs": 3, "layers": [{"units": 6, "activation": "sigmoid"}]}, "count": 3},
    "rounds": {"count": 1}, "results_layout": "members"})");
  auto run = Run({BinaryPath("ensembled"), "run", "--config", tmp / "run.json"}, tmp.path());
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  const RunLayout layout(tmp / "state");
  const std::string csv = tmp / "rows.csv";
  {
    const auto names = nlohmann::json::parse(ReadText(layout.RunFile()))["feature_names"];
    std::string text;
    for (size_t f = 0; f < names.size(); ++f) text += (f ? "," : "") + names[f].get<std::string>();
    text += "\n";
    for (int r = 0; r < 7; ++r) {
      for (size_t f = 0; f < names.size(); ++f) text += (f ? "," : "") + std::to_string(0.1 * r - 0.07 * static_cast<double>(f));
      text += "\n";
    }
    WriteText(csv, text);
  }
  // What the new layout gives: predictions, the ensemble export and one member's module.
  auto outputs = [&](const std::string& tag) {
    std::vector<std::string> out;
    auto p = Run({BinaryPath("ensemblectl"), "predict", "-s", tmp / "state", "-i", csv}, tmp.path());
    INFO(p.out << p.err);
    REQUIRE(p.code == 0);
    out.push_back(p.out);
    for (const std::vector<std::string>& extra : {std::vector<std::string>{}, std::vector<std::string>{"--member", "m001"}}) {
      std::vector<std::string> argv = {BinaryPath("ensemblectl"), "export", "-s", tmp / "state", "-o",
                                       tmp / (tag + std::to_string(out.size()) + ".pt")};
      argv.insert(argv.end(), extra.begin(), extra.end());
      auto e = Run(argv, tmp.path());
      INFO(e.out << e.err);
      REQUIRE(e.code == 0);
      out.push_back(ReadText(argv[5]).size() > 0 ? "written" : "empty");
    }
    return out;
  };
  const std::vector<std::string> fresh = outputs("new");
  for (const char* m : {"m000", "m001", "m002"}) {
    const MemberFiles f(layout.MemberDir(0, m));
    REQUIRE(std::filesystem::exists(f.Weights()));
    REQUIRE_FALSE(std::filesystem::exists(f.Checkpoint()));
    auto made = Run({BinaryPath("ensemble-worker"), "member-module", "--output", f.Checkpoint(), f.Weights()}, tmp.path());
    INFO(made.out << made.err);
    REQUIRE(made.code == 0);
    std::filesystem::remove(f.Weights());
  }
  CHECK(outputs("old") == fresh);
  // The member modules written from the two layouts load as the same member, tensor for tensor.
  auto same = Run({BinaryPath("ensemble-worker"), "compare", tmp / "new2.pt", tmp / "old2.pt"}, tmp.path());
  INFO(same.out << same.err);
  CHECK(same.code == 0);
  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", tmp / "state", "--all"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  CHECK_THAT(verify.out, Catch::Contains("3 member(s) checked, 0 mismatch(es)"));
}

}  // namespace
}  // namespace ens
