// A row's predicted numbers are a function of the row and the members only (checkpoint.h:
// blocked forward): the same bits from a member's checkpoint on any batch, for the row alone,
// in its holdout_pred.f32, from the exported module on any batch, and from `ensemblectl
// predict` with a file, with --input - in batches of any sizes, and for the row alone; and
// predict's text reads back to the float32 it computed. For every model kind ensembled runs
// itself: MLP regression, Gaussian heads, classification, several targets, TorchScript.
// The layer widths are ones whose GEMMs MKL computes with a row-alignment-dependent order.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "support/env_spawn.h"
#include "support/member_files_py.h"
#include "support/process_harness.h"
#include "support/python_imports.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

// argv: state dir, ensemblectl, scratch dir. Prints "ok <rows>" or exits non-zero saying what
// differs.
constexpr const char* kCheck = R"PY(
import json, os, random, struct, subprocess, sys
import numpy as np
import torch
torch.set_num_threads(1)
state, ctl, scratch = sys.argv[1:4]
raw = open(state + "/data/holdout.bin", "rb").read()
rows = struct.unpack_from("<Q", raw, 24)[0]
features, targets = struct.unpack_from("<II", raw, 40)
targets = targets or 1
table = np.frombuffer(raw, dtype="<f4", count=rows * (features + targets), offset=4096).reshape(rows, features + targets)
X = np.ascontiguousarray(table[:, :features])
x = torch.from_numpy(X)
rng = random.Random(7)
cuts, at = [], 0
while at < rows:  # batches of 1 to 40 rows, then one of 257 (more than a block)
    size = 257 if len(cuts) == 6 else rng.randint(1, 40)
    cuts.append((at, min(rows, at + size)))
    at += size
fail = []
def same(what, a, b):
    if a.tobytes() != b.tobytes():
        fail.append(f"{what}: differs (max abs diff {np.abs(a.astype(np.float64) - b.astype(np.float64)).max()})")

def runs(f):  # f on every row at once, each row alone, the batches, and rows 1.. (shifted by one)
    with torch.no_grad():
        whole = f(x)
        alone = [f(x[i:i + 1]) for i in range(rows)]
        parts = [f(x[a:b]) for a, b in cuts]
        shifted = f(x[1:])
    return whole, alone, parts, shifted

rdir = sorted(os.listdir(state + "/rounds"))[-1]
members = round_members(f"{state}/rounds/{rdir}")
preds = []
for m in members:
    want = np.frombuffer(member_bytes(f"{state}/rounds/{rdir}", m, "holdout_pred.f32"), dtype="<f4")
    r = subprocess.run([ctl, "export", "--state-dir", state, "--round", str(int(rdir[1:])), "--member", m, "-o",
                        f"{scratch}/{m}.pt"], capture_output=True, text=True)  # its module, built from weights.bin
    if r.returncode != 0: sys.exit("export --member: " + r.stderr)
    whole, alone, parts, shifted = runs(torch.jit.load(f"{scratch}/{m}.pt"))
    same(m + " checkpoint on all rows vs holdout_pred.f32", whole.numpy(), want.reshape(whole.shape))
    same(m + " each row alone", torch.cat(alone).numpy(), whole.numpy())
    same(m + " batches of 1-40 and 257 rows", torch.cat(parts).numpy(), whole.numpy())
    same(m + " rows shifted by one", shifted.numpy(), whole[1:].numpy())
    preds.append(whole.numpy().reshape(rows, -1))

r = subprocess.run([ctl, "export", "--state-dir", state, "-o", scratch + "/e.pt"], capture_output=True, text=True)
if r.returncode != 0: sys.exit("export: " + r.stderr)
whole, alone, parts, shifted = runs(torch.jit.load(scratch + "/e.pt"))
for i in range(len(whole)):
    same(f"export output {i} each row alone", torch.cat([a[i] for a in alone]).numpy(), whole[i].numpy())
    same(f"export output {i} batches", torch.cat([p[i] for p in parts]).numpy(), whole[i].numpy())
    same(f"export output {i} shifted by one", shifted[i].numpy(), whole[i][1:].numpy())

names = json.load(open(state + "/run.json"))["feature_names"]
header = ",".join(names)
lines = [",".join(repr(float(v)) for v in row) for row in X]  # repr of a float32's double: exact
open(scratch + "/all.csv", "w").write(header + "\n" + "\n".join(lines) + "\n")
r = subprocess.run([ctl, "predict", "-s", state, "-i", scratch + "/all.csv"], capture_output=True, text=True)
if r.returncode != 0: sys.exit("predict: " + r.stderr)
# The members' own mean (the default is the round's calibration: a classifier's tempered
# probabilities, a regression's mapped std), for the check against it below.
raw = subprocess.run([ctl, "predict", "-s", state, "-i", scratch + "/all.csv", "--raw-sigma"], capture_output=True,
                     text=True)
if raw.returncode != 0: sys.exit("predict --raw-sigma: " + raw.stderr)
raw_rows = [l.split(",", 1)[1] for l in raw.stdout.splitlines()[1:]]
file_rows = [l.split(",", 1)[1] for l in r.stdout.splitlines()[1:]]
def stream(groups):
    text = header + "\n" + "\n\n".join("\n".join(lines[a:b]) for a, b in groups) + "\n"
    r = subprocess.run([ctl, "predict", "-s", state, "-i", "-"], input=text, capture_output=True, text=True)
    if r.returncode != 0: sys.exit("predict -i -: " + r.stderr)
    return [l.split(",", 1)[1] for l in r.stdout.splitlines() if l and not l.startswith("row,")]
if stream(cuts) != file_rows: fail.append("predict: stdin batches differ from the file")
if stream([(i, i + 1) for i in range(20)]) != file_rows[:20]: fail.append("predict: rows alone differ from the file")
# The first number after the row (mean, <t0>_mean, or p of the first class) reads back to the
# float32 of the members' mean, summed in double in member order.
col = 1 if r.stdout.startswith("row,class,") else 0
mean = sum(p[:, 0].astype(np.float64) for p in preds) / len(preds)
got = np.array([np.float32(l.split(",")[col]) for l in raw_rows], dtype=np.float32)
same("predict's first column read back vs the members' mean as float32", got, mean.astype(np.float32))
if fail: sys.exit("\n".join(fail))
print("ok", rows)
)PY";

std::string Config(const TempDir& tmp, const std::string& data, const std::string& defaults, const std::string& extra) {
  return R"({"run_name": "bits", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 4,
    "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
    "data": )" + data + R"(,
    "members": {"count": 2, "defaults": )" + defaults + R"(}, "rounds": {"count": 1})" + extra + "}";
}

const char* kSynthetic = R"({"synthetic": {"initial_rows": 120, "pool_rows": 20, "holdout_rows": 300}})";

// Rows of x0..x6 with `targets` target columns t0.. (regression) or a label among a, b, c.
std::string Csv(int rows, int targets, bool labels) {
  std::ostringstream out;
  out << "x0,x1,x2,x3,x4,x5,x6";
  for (int t = 0; t < targets; ++t) out << ",t" << t;
  if (labels) out << ",label";
  out << "\n";
  uint32_t s = 12345;
  auto next = [&] { return (s = s * 1664525u + 1013904223u) / 4294967296.0; };
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int f = 0; f < 7; ++f) {
      double v = next();
      sum += v * (f + 1);
      out << (f ? "," : "") << v;
    }
    for (int t = 0; t < targets; ++t) out << "," << sum * (t + 1) + next();
    if (labels) out << "," << "abc"[static_cast<int>(sum) % 3];
    out << "\n";
  }
  return out.str();
}

void RunAndCheck(const TempDir& tmp, const std::string& config) {
  WriteText(tmp / "run.json", config);
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 300);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  WriteText(tmp / "check.py", MemberFilesPy() + kCheck);
  auto py = Run({ENS_PYTHON, tmp / "check.py", tmp / "state", BinaryPath("ensemblectl"), tmp.path()}, tmp.path());
  INFO(py.out << py.err);
  CHECK(py.code == 0);
  CHECK_THAT(py.out, Catch::StartsWith("ok "));
}

TEST_CASE("an MLP member's numbers for a row do not depend on its batch", "[bits]") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  RunAndCheck(tmp, Config(tmp, kSynthetic,
                          R"({"epochs": 2, "layers": [{"units": 9, "activation": "tanh"}, {"units": 6, "activation": "gelu"}]})",
                          ""));
}

TEST_CASE("a Gaussian head's numbers for a row do not depend on its batch", "[bits]") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  RunAndCheck(tmp, Config(tmp, kSynthetic, R"({"epochs": 2, "layers": [{"units": 7}], "loss": "gaussian_nll"})", ""));
}

TEST_CASE("a classifier's probabilities for a row do not depend on its batch", "[bits]") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  WriteText(tmp / "train.csv", Csv(500, 0, true));
  RunAndCheck(tmp, Config(tmp, R"({"source": "csv", "train_path": "train.csv", "target_column": "label",
                                   "holdout_fraction": 0.6})",
                          R"({"epochs": 2, "layers": [{"units": 6, "activation": "swish"}]})", R"(, "task": "classification")"));
}

TEST_CASE("several targets' numbers for a row do not depend on its batch", "[bits]") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  WriteText(tmp / "train.csv", Csv(500, 3, false));
  RunAndCheck(tmp, Config(tmp, R"({"source": "csv", "train_path": "train.csv", "target_columns": ["t0", "t1", "t2"],
                                   "holdout_fraction": 0.6})",
                          R"({"epochs": 2, "layers": [{"units": 5}]})", ""));
}

TEST_CASE("a TorchScript member's numbers for a row do not depend on its batch", "[bits]") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  const std::string example = std::string(ENS_SOURCE_DIR) + "/examples/torchscript/model.py";
  auto made = Run({ENS_PYTHON, example, "--features", "10", "--width", "12", "--output", tmp / "model.pt"}, tmp.path());
  INFO(made.out << made.err);
  REQUIRE(made.code == 0);
  RunAndCheck(tmp, Config(tmp, kSynthetic, R"({"epochs": 2, "model": {"kind": "torchscript", "path": ")" + tmp / "model.pt" + R"("}})",
                          ""));
}

}  // namespace
}  // namespace ens
