// Command members (worker/models/command_member.h) in-process: a real program (a Python script that
// needs nothing but the standard library) on real segments. What it is handed, what it must
// produce, and every way it can go wrong: not found, non-zero exits, 78, a hang, misshapen,
// non-finite or missing outputs, a flood of output, children left behind.
#include "worker/models/command_member.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/data/data_source.h"
#include "common/base/exit_codes.h"
#include "common/data/npy_writer.h"
#include "common/state/run_layout.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

constexpr int kFeatures = 5, kTrain = 40, kHoldout = 12, kPool = 7;

// The stand-in model: predicts the mean of train_y everywhere; argv[1] picks a misbehaviour.
constexpr const char* kModel = R"PY(
import json, os, struct, subprocess, sys, time

def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + n].decode()
    body = data[10 + n:]
    return list(struct.unpack("<%df" % (len(body) // 4), body)), header

def save(path, values, shape=None):
    shape = shape or (len(values),)
    dims = "(%s)" % (", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % dims
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % len(values), *values))

mode = sys.argv[1]
env = {k: v for k, v in os.environ.items() if k.startswith("ENSEMBLED_") or k == "OMP_NUM_THREADS"}
out = os.environ["ENSEMBLED_OUTPUT_DIR"]
y, _ = load(os.environ["ENSEMBLED_TRAIN_Y"])
x, xh = load(os.environ["ENSEMBLED_TRAIN_X"])
vy, _ = load(os.environ["ENSEMBLED_VAL_Y"])
hx, hh = load(os.environ["ENSEMBLED_HOLDOUT_X"])
px, _ = load(os.environ["ENSEMBLED_POOL_X"])
features = int(os.environ["ENSEMBLED_FEATURES"])
nh, npool = len(hx) // features, len(px) // features
mean = sum(y) / len(y)
print("training on", len(y), "rows; x header", xh.strip(), flush=True)
if mode == "exit3":
    print("something transient went wrong", flush=True); sys.exit(3)
if mode == "exit78":
    print("bad hyperparameters", flush=True); sys.exit(78)
if mode == "hang":
    time.sleep(1000)
if mode == "slow":
    time.sleep(1.2)
if mode == "flood":
    chunk = "x" * 1023 + "\n"
    for _ in range(20 * 1024):
        sys.stdout.write(chunk)
    sys.stdout.flush()
if mode == "children":
    same = subprocess.Popen(["/bin/sleep", "1000"])
    away = subprocess.Popen(["/bin/sleep", "1000"], start_new_session=True)
    with open(os.path.join(os.environ["ENSEMBLED_MEMBER_DIR"] + ".pids"), "w") as f:
        f.write("%d %d\n" % (same.pid, away.pid))
holdout = [mean] * nh
if mode == "nan":
    holdout[5] = float("nan")
if mode == "shape":
    holdout = holdout[:-1]
if mode != "nothing":
    save(os.path.join(out, "holdout_pred.npy"), holdout, (len(holdout), 1))
    save(os.path.join(out, "pool_pred.npy"), [mean] * npool)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"env": env, "train_rows": len(y), "val_rows": len(vy), "train_x_len": len(x)}, f)
    with open(os.path.join(out, "history.jsonl"), "w") as f:
        f.write('{"epoch": 0, "loss": 1.5}\n{"epoch": 1, "loss": 0.5}\n')
)PY";

struct Fixture {
  TempDir dir;
  std::string data_dir = dir.path() + "/data";
  std::unique_ptr<DatasetView> train, holdout;
  Table train_table, holdout_table;
  MemberRows split;
  TaskSpec task;
  std::string script = dir.path() + "/model.py";

  Fixture() {
    std::filesystem::create_directories(data_dir);
    train_table = GenerateFriedman1(kTrain, kFeatures, 0.1, 7);
    holdout_table = GenerateFriedman1(kHoldout, kFeatures, 0.1, 8);
    Table pool = GenerateFriedman1(kPool, kFeatures, 0.1, 9);
    REQUIRE(DatasetWriter::Create(RunLayout::TrainSegment(data_dir), train_table, 0).ok());
    REQUIRE(DatasetWriter::Create(RunLayout::HoldoutSegment(data_dir), holdout_table, 0).ok());
    const uint64_t f = train_table.features;
    REQUIRE(WriteNpyFloat32(RunLayout::HoldoutFeatures(data_dir), holdout_table.x.data(), kHoldout, f, f).ok());
    REQUIRE(WriteNpyFloat32(RunLayout::PoolFeatures(data_dir), pool.x.data(), kPool, f, f).ok());
    auto t = DatasetView::Map(RunLayout::TrainSegment(data_dir));
    auto h = DatasetView::Map(RunLayout::HoldoutSegment(data_dir));
    REQUIRE(t.ok());
    REQUIRE(h.ok());
    train = std::move(*t);
    holdout = std::move(*h);
    auto s = MemberRows::Make(kTrain, {}, 0.25, SplitKind::kBootstrap, 1234, "m003");
    REQUIRE(s.ok());
    split = std::move(*s);
    WriteText(script, kModel);
    task.task_id = "r2-m003";
    task.round = 2;
    task.member_index = 3;
    task.seed = 1234;
    task.generation = 1;
    task.rows = kTrain;
    task.attempt = 1;
    task.threads = 2;
    task.data_dir = data_dir;
    task.out_dir = dir.path() + "/rounds/r0002/members/m003";
    task.member.name = "m003";
    task.member.model.kind = ModelKind::kCommand;
    Mode("ok");
  }
  void Mode(const std::string& mode) { task.member.model.argv = {"/usr/bin/python3", script, mode}; }
  std::string Dir() const { return task.out_dir + ".tmp"; }
  CommandMemberResult Run(int* waits = nullptr, std::vector<std::string>* log = nullptr) {
    std::filesystem::create_directories(Dir());
    CommandMemberJob job;
    job.task = &task;
    job.train = train.get();
    job.holdout = holdout.get();
    job.split = &split;
    job.data_dir = data_dir;
    job.pool_rows = kPool;
    job.dir = Dir();
    job.on_wait = [waits] {
      if (waits) ++*waits;
    };
    job.on_log = [log](const std::string& line) {
      if (log) log->push_back(line);
    };
    return RunCommandMember(job);
  }
};

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST_CASE("a command member gets its rows and the run's features, and its predictions and metrics are read back") {
  Fixture f;
  std::vector<std::string> log;
  CommandMemberResult r = f.Run(nullptr, &log);
  INFO(r.status.ToString());
  REQUIRE(r.status.ok());
  // The member's own split: 30 bootstrap draws for training, 10 rows for validation.
  const nlohmann::json& own = r.metrics["command"];
  CHECK(own["train_rows"] == f.split.train_size());
  CHECK(own["val_rows"] == f.split.val_size());
  CHECK(own["train_x_len"] == f.split.train_size() * kFeatures);
  // Its predictions: the mean of the training targets it was handed, row for row.
  std::vector<int64_t> ids(f.split.train_size());
  f.split.Train(0, ids.size(), ids.data());
  double mean = 0;
  for (int64_t id : ids) mean += f.train_table.y[id];
  mean /= static_cast<double>(ids.size());
  REQUIRE(r.holdout_pred.size() == kHoldout);
  REQUIRE(r.pool_pred.size() == kPool);
  CHECK(r.holdout_pred[0] == Approx(mean).epsilon(1e-5));
  CHECK(r.pool_pred[kPool - 1] == Approx(mean).epsilon(1e-5));
  double se = 0;
  for (int i = 0; i < kHoldout; ++i) se += std::pow(double(r.holdout_pred[i]) - f.holdout_table.y[i], 2);
  CHECK(r.metrics["holdout_rmse"].get<double>() == Approx(std::sqrt(se / kHoldout)).epsilon(1e-6));
  CHECK(r.history.size() == 2);
  CHECK(r.metrics["epochs_run"] == 2);
  // The environment it ran in.
  const nlohmann::json& env = own["env"];
  CHECK(env["ENSEMBLED_MEMBER"] == "m003");
  CHECK(env["ENSEMBLED_MEMBER_INDEX"] == "3");
  CHECK(env["ENSEMBLED_ROUND"] == "2");
  CHECK(env["ENSEMBLED_GENERATION"] == "1");
  CHECK(env["ENSEMBLED_SEED"] == "1234");
  CHECK(env["ENSEMBLED_SEED_INIT"] == std::to_string(StreamSeed(1234, SeedStream::kInit)));
  CHECK(env["OMP_NUM_THREADS"] == "2");
  CHECK(env["ENSEMBLED_OUTPUT_DIR"] == f.Dir() + "/model");
  // Inputs are removed; outputs and the log stay with the member.
  CHECK_FALSE(std::filesystem::exists(f.Dir() + "/input"));
  CHECK(std::filesystem::exists(f.Dir() + "/model/holdout_pred.npy"));
  CHECK(ReadText(f.Dir() + "/command.log").find("training on 30 rows") != std::string::npos);
  REQUIRE_FALSE(log.empty());
  CHECK(log[0].rfind("[m003] training on 30 rows", 0) == 0);
}

TEST_CASE("heartbeats go on while the program runs") {
  Fixture f;
  f.Mode("slow");
  int waits = 0;
  REQUIRE(f.Run(&waits).status.ok());
  CHECK(waits >= 4);  // 1.2 s of sleep, a call at least every 200 ms
}

TEST_CASE("a program that cannot be found is a permanent failure naming it") {
  Fixture f;
  f.task.member.model.argv = {f.dir.path() + "/no-such-program"};
  CommandMemberResult r = f.Run();
  CHECK(r.status.code() == Status::Code::kNotFound);
  CHECK(r.permanent);
  CHECK(r.status.message().find("no-such-program") != std::string::npos);
  f.task.member.model.argv = {"no-such-program-in-path"};
  r = f.Run();
  CHECK(r.permanent);
  CHECK(r.status.message().find("no-such-program-in-path") != std::string::npos);
}

TEST_CASE("a non-zero exit is transient with the end of its output, exit 78 is permanent") {
  Fixture f;
  f.Mode("exit3");
  CommandMemberResult r = f.Run();
  CHECK_FALSE(r.status.ok());
  CHECK_FALSE(r.permanent);
  CHECK(r.status.message().find("exited with 3") != std::string::npos);
  CHECK(r.status.message().find("something transient went wrong") != std::string::npos);
  f.Mode("exit78");
  r = f.Run();
  CHECK(r.permanent);
  CHECK(r.status.message().find("exited with 78") != std::string::npos);
}

TEST_CASE("a program that hangs is killed at timeout_s, a transient failure") {
  Fixture f;
  f.Mode("hang");
  f.task.member.model.timeout_s = 1.0;
  const auto t0 = std::chrono::steady_clock::now();
  CommandMemberResult r = f.Run();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.status.code() == Status::Code::kTimeout);
  CHECK_FALSE(r.permanent);
  CHECK(took < 10.0);
}

TEST_CASE("wrong shapes, a NaN or no outputs are a permanent failure naming the file") {
  Fixture f;
  f.Mode("shape");
  CommandMemberResult r = f.Run();
  CHECK(r.permanent);
  CHECK(r.status.message().find("holdout_pred.npy: shape (11, 1), expected (12,)") != std::string::npos);
  f.Mode("nan");
  r = f.Run();
  CHECK(r.permanent);
  CHECK(r.status.message().find("holdout_pred.npy: non-finite value at element 5 (row 5, column 0)") != std::string::npos);
  f.Mode("nothing");
  r = f.Run();
  CHECK(r.permanent);
  CHECK(r.status.message().find("holdout_pred.npy") != std::string::npos);
}

TEST_CASE("a flood of output is capped in command.log and the member still succeeds") {
  Fixture f;
  f.Mode("flood");  // 20 MiB of lines
  std::vector<std::string> log;
  CommandMemberResult r = f.Run(nullptr, &log);
  INFO(r.status.ToString());
  REQUIRE(r.status.ok());
  struct stat st {};
  REQUIRE(::stat((f.Dir() + "/command.log").c_str(), &st) == 0);
  CHECK(static_cast<uint64_t>(st.st_size) <= kCommandLogBytes + 200);
  CHECK(static_cast<uint64_t>(st.st_size) >= kCommandLogBytes);
  CHECK(ReadText(f.Dir() + "/command.log").find("further bytes of output dropped") != std::string::npos);
  CHECK(log.size() == kCommandLogLines + 1);  // then one line saying where the rest is
}

TEST_CASE("children a program leaves behind do not survive it, in its group or not") {
  Fixture f;
  f.Mode("children");
  REQUIRE(f.Run().status.ok());
  pid_t same = 0, away = 0;
  std::istringstream(ReadText(f.task.out_dir + ".pids")) >> same >> away;
  REQUIRE(same > 0);
  REQUIRE(away > 0);
  CHECK_FALSE(Alive(same));
  CHECK_FALSE(Alive(away));
}

}  // namespace
}  // namespace ens
