// Tests of orchestrator/run_queue: what a run config asks of the daemon (GrantPool::AskOf),
// exclusive grants of whole GPUs by UUID and of CPU worker slots, the reasons a run waits, the
// start order (resumed runs, then priority, then age), and the state table.
#include "orchestrator/serve/run_queue.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "orchestrator/gpu/gpu_share.h"

namespace ens {
namespace {

std::vector<ServeGpu> FourGpus() {
  return {{"GPU-aaaa", 0}, {"GPU-bbbb", 1}, {"GPU-cccc", 2}, {"GPU-dddd", 3}};
}

ResourcesSpec Cpu(int workers) {
  ResourcesSpec r;
  r.gpus = GpuSelection::None();
  r.cpu_workers = workers;
  return r;
}

ResourcesSpec GpuList(std::vector<std::string> ids) {
  ResourcesSpec r;
  r.gpus = GpuSelection::List(std::move(ids));
  return r;
}

ServedRun Queued(const std::string& name, uint64_t seq, RunAsk ask, int priority = 0) {
  ServedRun r;
  r.name = name;
  r.seq = seq;
  r.ask = std::move(ask);
  r.priority = priority;
  return r;
}

std::vector<std::string> Names(const std::vector<ServedRun*>& runs) {
  std::vector<std::string> out;
  for (const ServedRun* r : runs) out.push_back(r->name);
  return out;
}

TEST_CASE("a run's ask: its GPUs by UUID, or its CPU workers", "[serve][queue]") {
  GrantPool gpus(FourGpus(), 8);
  ResourcesSpec all;  // "auto"
  auto ask = gpus.AskOf(all);
  REQUIRE(ask.ok());
  CHECK(ask->gpus == std::vector<std::string>{"GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"});
  ask = gpus.AskOf(GpuList({"2", "GPU-a"}));  // an index, a UUID prefix
  REQUIRE(ask.ok());
  CHECK(ask->gpus == std::vector<std::string>{"GPU-cccc", "GPU-aaaa"});
  ask = gpus.AskOf(Cpu(3));
  REQUIRE(ask.ok());
  CHECK(ask->gpus.empty());
  CHECK(ask->cpu_workers == 3);

  GrantPool cpu_only({}, 2);
  ask = cpu_only.AskOf(all);  // "auto" without GPUs: its CPU workers, as `ensembled run` does
  REQUIRE(ask.ok());
  CHECK(ask->cpu_workers == 2);
}

TEST_CASE("an ask the machine can never meet is refused with its pointer", "[serve][queue]") {
  GrantPool gpus(FourGpus(), 2);
  auto ask = gpus.AskOf(GpuList({"7"}));
  REQUIRE_FALSE(ask.ok());
  CHECK_THAT(ask.status().message(), Catch::StartsWith("/resources/gpus/0: '7' is none of this daemon's 4 GPUs"));
  ask = gpus.AskOf(GpuList({"0", "GPU-"}));  // a prefix of every UUID
  REQUIRE_FALSE(ask.ok());
  CHECK_THAT(ask.status().message(), Catch::Contains("/resources/gpus/1: 'GPU-' is more than one"));
  ask = gpus.AskOf(Cpu(3));
  REQUIRE_FALSE(ask.ok());
  CHECK(ask.status().message() == "/resources/cpu_workers: asks 3 CPU workers; this daemon has 2");
  GrantPool cpu_only({}, 2);
  ask = cpu_only.AskOf(GpuList({"0"}));
  REQUIRE_FALSE(ask.ok());
  ResourcesSpec slurm;
  slurm.executor = ExecutorKind::kSlurm;
  CHECK_FALSE(gpus.AskOf(slurm).ok());
}

TEST_CASE("GPUs are granted whole and exclusively - a run that does not fit says why", "[serve][queue]") {
  RunQueue q(GrantPool(FourGpus(), 2));
  ServedRun a = Queued("a", 1, *q.pool().AskOf(GpuList({"0", "1"})));
  ServedRun b = Queued("b", 2, *q.pool().AskOf(GpuList({"1", "2"})));
  ServedRun c = Queued("c", 3, *q.pool().AskOf(GpuList({"2", "3"})));
  auto started = q.StartNow({&a, &b, &c}, 0);
  CHECK(Names(started) == std::vector<std::string>{"a", "c"});  // b overlaps both: it waits
  CHECK(b.state == RunState::kQueued);
  CHECK(b.reason == "needs 2 GPUs, 1 of them free");  // GPU 1 is a's (c, after b, was not started yet)
  std::set<std::string> granted(a.grant.gpus.begin(), a.grant.gpus.end());
  for (const std::string& id : c.grant.gpus) CHECK(granted.insert(id).second);  // none shared
  CHECK(q.pool().free_gpus() == 0);
  REQUIRE(q.Move(a, RunState::kFinished).ok());
  CHECK(a.grant.gpus.empty());
  CHECK(q.pool().free_gpus() == 2);
  CHECK(q.StartNow({&a, &b, &c}, 0).empty());  // GPU 2 is still c's
  CHECK(b.reason == "needs 2 GPUs, 1 of them free");
  REQUIRE(q.Move(c, RunState::kStopping).ok());
  CHECK(q.pool().free_gpus() == 2);  // a stopping run keeps its grant until its child is gone
  REQUIRE(q.Move(c, RunState::kCancelled).ok());
  CHECK(Names(q.StartNow({&a, &b, &c}, 0)) == std::vector<std::string>{"b"});
  CHECK(b.grant.gpus == std::vector<std::string>{"GPU-bbbb", "GPU-cccc"});
}

ResourcesSpec GpuCount(int n) {
  ResourcesSpec r;
  r.gpus = GpuSelection::Count(n);
  return r;
}

TEST_CASE("a GPU count takes any free GPUs, the lowest indices first - more than the daemon has is refused",
          "[serve][queue]") {
  RunQueue q(GrantPool(FourGpus(), 2));
  auto two = q.pool().AskOf(GpuCount(2));
  REQUIRE(two.ok());
  CHECK(two->gpu_count == 2);
  CHECK(two->gpus.empty());
  CHECK(DescribeGrant(*two) == "2 GPUs (any free)");
  auto five = q.pool().AskOf(GpuCount(5));
  REQUIRE_FALSE(five.ok());
  CHECK(five.status().message() == "/resources/gpus: asks 5 GPUs, more than this daemon's 4 GPUs");
  GrantPool cpu_only({}, 2);
  auto none = cpu_only.AskOf(GpuCount(1));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() == "/resources/gpus: asks 1 GPU, more than this daemon's 0 GPUs");

  ServedRun listed = Queued("listed", 1, *q.pool().AskOf(GpuList({"1"})));
  ServedRun a = Queued("a", 2, *two), b = Queued("b", 3, *two);
  ServedRun all = Queued("all", 4, *q.pool().AskOf(GpuCount(4)));
  ServedRun one = Queued("one", 5, *q.pool().AskOf(GpuCount(1)));
  CHECK(Names(q.StartNow({&listed, &a, &b, &all, &one}, 0)) == std::vector<std::string>{"listed", "a", "one"});
  CHECK(a.grant.gpus == std::vector<std::string>{"GPU-aaaa", "GPU-cccc"});  // 1 is listed's
  CHECK(a.grant.gpu_count == 0);  // a grant names its GPUs
  CHECK(DescribeGrant(a.grant) == "2 GPUs (GPU-aaaa, GPU-cccc)");
  CHECK(one.grant.gpus == std::vector<std::string>{"GPU-dddd"});
  CHECK(b.reason == "needs 2 GPUs, 1 free");
  CHECK(all.reason == "needs 4 GPUs, 1 free");  // (said before "one", behind it, took the last)
  CHECK(q.pool().free_gpus() == 0);
  REQUIRE(q.Move(listed, RunState::kFinished).ok());
  REQUIRE(q.Move(one, RunState::kFinished).ok());
  CHECK(Names(q.StartNow({&listed, &a, &b, &all, &one}, 0)) == std::vector<std::string>{"b"});
  CHECK(b.grant.gpus == std::vector<std::string>{"GPU-bbbb", "GPU-dddd"});
  std::set<std::string> held(a.grant.gpus.begin(), a.grant.gpus.end());
  for (const std::string& id : b.grant.gpus) CHECK(held.insert(id).second);  // none shared
  REQUIRE(q.Move(a, RunState::kFinished).ok());
  REQUIRE(q.Move(b, RunState::kFinished).ok());
  CHECK(Names(q.StartNow({&listed, &a, &b, &all, &one}, 0)) == std::vector<std::string>{"all"});
  CHECK(all.grant.gpus.size() == 4);
  REQUIRE(q.Move(all, RunState::kFinished).ok());
  CHECK(q.pool().free_gpus() == 4);

  // "Lowest index" is the physical index, whatever order the daemon lists its GPUs in.
  RunQueue shuffled(GrantPool({{"GPU-three", 3}, {"GPU-one", 1}, {"GPU-two", 2}}, 1));
  ServedRun first = Queued("first", 1, *shuffled.pool().AskOf(GpuCount(1)));
  REQUIRE(shuffled.StartNow({&first}, 0).size() == 1);
  CHECK(first.grant.gpus == std::vector<std::string>{"GPU-one"});
  ServedRun lone = Queued("lone", 2, *shuffled.pool().AskOf(GpuCount(3)));
  CHECK(shuffled.StartNow({&first, &lone}, 0).empty());
  CHECK(lone.reason == "needs 3 GPUs, 2 free");
}

TEST_CASE("CPU worker slots: three runs asking 2 of 2 run one at a time", "[serve][queue]") {
  RunQueue q(GrantPool({}, 2));
  ServedRun a = Queued("a", 1, {{}, 2}), b = Queued("b", 2, {{}, 2}), c = Queued("c", 3, {{}, 2});
  CHECK(Names(q.StartNow({&a, &b, &c}, 0)) == std::vector<std::string>{"a"});
  CHECK(b.reason == "needs 2 CPU workers, 0 free");
  REQUIRE(q.Move(a, RunState::kFinished).ok());
  CHECK(Names(q.StartNow({&a, &b, &c}, 0)) == std::vector<std::string>{"b"});
  REQUIRE(q.Move(b, RunState::kFailed).ok());
  CHECK(Names(q.StartNow({&a, &b, &c}, 0)) == std::vector<std::string>{"c"});
  CHECK(q.pool().free_cpu_workers() == 0);
}

TEST_CASE("start order: resumed runs, then the highest priority, then the oldest", "[serve][queue]") {
  RunQueue q(GrantPool({}, 1));
  ServedRun old_low = Queued("old_low", 1, {{}, 1}, 0);
  ServedRun new_high = Queued("new_high", 5, {{}, 1}, 10);
  ServedRun mid_high = Queued("mid_high", 3, {{}, 1}, 10);
  ServedRun resumed = Queued("resumed", 9, {{}, 1}, -5);
  resumed.resume_first = true;
  std::vector<ServedRun*> all = {&old_low, &new_high, &mid_high, &resumed};
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    auto started = q.StartNow(all, 0);
    REQUIRE(started.size() == 1);
    order.push_back(started[0]->name);
    REQUIRE(q.Move(*started[0], RunState::kFinished).ok());
  }
  CHECK(order == std::vector<std::string>{"resumed", "mid_high", "new_high", "old_low"});
}

TEST_CASE("a crashed run waits for its restart time - others may start meanwhile", "[serve][queue]") {
  RunQueue q(GrantPool({}, 2));
  ServedRun crashed = Queued("crashed", 1, {{}, 2}), next = Queued("next", 2, {{}, 1});
  crashed.not_before = 100;
  crashed.reason = "restart 1 of 5 in 1 s after: exited with 1";
  CHECK(Names(q.StartNow({&crashed, &next}, 99.5)) == std::vector<std::string>{"next"});
  CHECK(crashed.reason == "restart 1 of 5 in 1 s after: exited with 1");
  REQUIRE(q.Move(next, RunState::kFinished).ok());
  CHECK(Names(q.StartNow({&crashed, &next}, 100)) == std::vector<std::string>{"crashed"});
}

TEST_CASE("the state table refuses every other move and changes nothing", "[serve][queue]") {
  RunQueue q(GrantPool({}, 2));
  ServedRun r = Queued("r", 1, {{}, 2});
  Status s = q.Move(r, RunState::kFinished);
  CHECK(s.code() == Status::Code::kInternal);
  CHECK(s.message() == "run r: no move from queued to finished");
  CHECK(r.state == RunState::kQueued);
  REQUIRE(q.Move(r, RunState::kRunning).ok());
  CHECK(q.pool().free_cpu_workers() == 0);
  CHECK_FALSE(q.Move(r, RunState::kRejected).ok());
  REQUIRE(q.Move(r, RunState::kQueued).ok());  // a crash: back in the queue, grant returned
  CHECK(q.pool().free_cpu_workers() == 2);
  REQUIRE(q.Move(r, RunState::kCancelled).ok());
  for (RunState to : {RunState::kQueued, RunState::kRunning, RunState::kStopping, RunState::kFinished})
    CHECK_FALSE(q.Move(r, to).ok());
  CHECK(IsEnded(r.state));
  CHECK(std::string(RunStateName(r.state)) == "cancelled");
}

std::vector<ServeGpu> TwoGpusOf16Gb() {
  return {{"GPU-aaaa", 0, uint64_t{16} << 30}, {"GPU-bbbb", 1, uint64_t{16} << 30}};
}

ResourcesSpec Share(int gpus, double gb, int workers_per_gpu = 1) {
  ResourcesSpec r;
  r.gpus = GpuSelection::Count(gpus);
  r.gpu_memory_gb = gb;
  r.workers_per_gpu = workers_per_gpu;
  return r;
}

ResourcesSpec Whole(int gpus) { return Share(gpus, 0); }

TEST_CASE("shares of GPU memory pack onto one GPU while they fit - a whole-GPU ask takes only an empty GPU",
          "[serve][queue][share]") {
  RunQueue q(GrantPool(TwoGpusOf16Gb(), 2));
  auto ask = q.pool().AskOf(Share(1, 3.5));
  REQUIRE(ask.ok());
  CHECK(ask->gpu_share_bytes == (uint64_t{7} << 29) + kGpuContextReserveBytes);  // 3.5 GB + 0.5 GB: 4 GB
  std::vector<ServedRun> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(Queued("s" + std::to_string(i), static_cast<uint64_t>(i + 1), *ask));
  ServedRun whole = Queued("whole", 9, *q.pool().AskOf(Whole(1)));
  std::vector<ServedRun*> all;
  for (ServedRun& r : runs) all.push_back(&r);
  all.push_back(&whole);
  // Four 4 GB shares fill GPU-aaaa (16 GB); the fifth goes to GPU-bbbb; "whole" then has none.
  CHECK(Names(q.StartNow(all, 0)) == std::vector<std::string>{"s0", "s1", "s2", "s3", "s4"});
  for (int i = 0; i < 4; ++i) CHECK(runs[static_cast<size_t>(i)].grant.gpus == std::vector<std::string>{"GPU-aaaa"});
  CHECK(runs[4].grant.gpus == std::vector<std::string>{"GPU-bbbb"});
  CHECK(q.pool().shared_bytes("GPU-aaaa") == uint64_t{16} << 30);
  CHECK(whole.state == RunState::kQueued);
  CHECK(whole.reason == "needs 1 GPU, 0 free");
  CHECK(DescribeGrant(runs[0].grant) == "1 GPU (GPU-aaaa) with 4 GB each");
  // The share on GPU-bbbb ends: the whole ask gets it, and a new share cannot go there.
  REQUIRE(q.Move(runs[4], RunState::kFinished).ok());
  CHECK(Names(q.StartNow(all, 0)) == std::vector<std::string>{"whole"});
  CHECK(whole.grant.gpus == std::vector<std::string>{"GPU-bbbb"});
  ServedRun late = Queued("late", 10, *ask);
  all.push_back(&late);
  CHECK(q.StartNow(all, 0).empty());
  CHECK(late.reason == "needs 1 GPU with 4 GB free, 0 have it");
  // One share on GPU-aaaa ends: the late share fits there.
  REQUIRE(q.Move(runs[1], RunState::kFinished).ok());
  CHECK(Names(q.StartNow(all, 0)) == std::vector<std::string>{"late"});
  CHECK(late.grant.gpus == std::vector<std::string>{"GPU-aaaa"});
}

TEST_CASE("a share goes to the fullest GPU it fits on - a share no GPU can hold is refused", "[serve][queue][share]") {
  RunQueue q(GrantPool(TwoGpusOf16Gb(), 2));
  ServedRun big = Queued("big", 1, *q.pool().AskOf(Share(1, 11.5)));   // 12 GB
  ServedRun mid = Queued("mid", 2, *q.pool().AskOf(Share(1, 7.5)));    // 8 GB: not beside big
  ServedRun small = Queued("small", 3, *q.pool().AskOf(Share(1, 3.5)));  // 4 GB: beside big (fuller)
  CHECK(Names(q.StartNow({&big, &mid, &small}, 0)) == std::vector<std::string>{"big", "mid", "small"});
  CHECK(big.grant.gpus == std::vector<std::string>{"GPU-aaaa"});
  CHECK(mid.grant.gpus == std::vector<std::string>{"GPU-bbbb"});
  CHECK(small.grant.gpus == std::vector<std::string>{"GPU-aaaa"});

  auto too_big = q.pool().AskOf(Share(1, 15.75));  // 16.25 GB with its context
  REQUIRE_FALSE(too_big.ok());
  CHECK_THAT(too_big.status().message(), Catch::StartsWith("/resources/gpu_memory_gb: 16.2 GB"));
  GrantPool unknown({{"GPU-aaaa", 0}}, 2);  // no NVML: memory unknown
  auto ask = unknown.AskOf(Share(1, 1));
  REQUIRE_FALSE(ask.ok());
  CHECK_THAT(ask.status().message(), Catch::Contains("or their memory is unknown"));
  CHECK(unknown.AskOf(Whole(1)).ok());
}

ServedRun Running(RunQueue& q, const std::string& name, uint64_t seq, const ResourcesSpec& r, int priority) {
  ServedRun run = Queued(name, seq, *q.pool().AskOf(r), priority);
  REQUIRE(q.Move(run, RunState::kRunning).ok());
  return run;
}

TEST_CASE("preemption takes the lowest priority, then the newest, no more runs than needed, never an equal one",
          "[serve][queue][preemption]") {
  RunQueue q(GrantPool(FourGpus(), 2));
  ServedRun a = Running(q, "a", 1, Whole(1), 0);
  ServedRun b = Running(q, "b", 2, Whole(1), 0);
  ServedRun c = Running(q, "c", 3, Whole(1), 3);
  ServedRun d = Running(q, "d", 4, Whole(1), 5);
  std::vector<ServedRun*> all = {&a, &b, &c, &d};
  ServedRun high = Queued("high", 5, *q.pool().AskOf(Whole(2)), 5);
  all.push_back(&high);
  // Two GPUs: the two of priority 0, the newer first (b, then a); c (3) is not needed.
  CHECK(Names(q.PreemptFor(high, all, 1)) == std::vector<std::string>{"b", "a"});
  ServedRun three = Queued("three", 6, *q.pool().AskOf(Whole(3)), 5);
  CHECK(Names(q.PreemptFor(three, all, 1)) == std::vector<std::string>{"b", "a", "c"});
  // A gap of 3: c (priority 3, 2 below) is not preemptible, and a, b are not enough for 3 GPUs.
  CHECK(q.PreemptFor(three, all, 3).empty());
  // d has the same priority: never preempted; four GPUs cannot be had.
  ServedRun four = Queued("four", 7, *q.pool().AskOf(Whole(4)), 5);
  CHECK(q.PreemptFor(four, all, 1).empty());
  // A run that fits needs nobody preempted.
  REQUIRE(q.Move(b, RunState::kFinished).ok());
  ServedRun one = Queued("one", 8, *q.pool().AskOf(Whole(1)), 9);
  CHECK(q.PreemptFor(one, all, 1).empty());
}

TEST_CASE("preemption of shares: only the runs on the GPU that frees enough", "[serve][queue][preemption][share]") {
  RunQueue q(GrantPool(TwoGpusOf16Gb(), 2));
  ServedRun big = Running(q, "big", 1, Share(1, 11.5), 0);    // GPU-aaaa
  ServedRun small = Running(q, "small", 2, Share(1, 3.5), 0);  // GPU-aaaa (fullest)
  ServedRun other = Running(q, "other", 3, Share(1, 7.5), 1);  // GPU-bbbb
  REQUIRE(small.grant.gpus == std::vector<std::string>{"GPU-aaaa"});
  std::vector<ServedRun*> all = {&big, &small, &other};
  // A whole GPU at priority 2: emptying GPU-aaaa takes two runs, GPU-bbbb one: the search
  // goes by priority (big, small at 0 first) and keeps only what is needed.
  ServedRun whole = Queued("whole", 4, *q.pool().AskOf(Whole(1)), 2);
  CHECK(Names(q.PreemptFor(whole, all, 1)) == std::vector<std::string>{"small", "big"});
  // An 8 GB share fits beside "other" now: nobody is preempted.
  ServedRun eight = Queued("eight", 5, *q.pool().AskOf(Share(1, 7.5)), 2);
  CHECK(q.PreemptFor(eight, all, 1).empty());
  // A 12 GB share fits on neither; tried newest first, "small" alone is not enough, "big" alone
  // is (4 + 12 GB): only "big" is preempted.
  ServedRun twelve = Queued("twelve", 6, *q.pool().AskOf(Share(1, 11.5)), 2);
  CHECK(Names(q.PreemptFor(twelve, all, 1)) == std::vector<std::string>{"big"});
}

TEST_CASE("a preempting run holds its grant until its child is gone, then queues again", "[serve][queue][preemption]") {
  RunQueue q(GrantPool({}, 2));
  ServedRun r = Queued("r", 1, {{}, 2});
  REQUIRE(q.Move(r, RunState::kRunning).ok());
  REQUIRE(q.Move(r, RunState::kPreempting).ok());
  CHECK(std::string(RunStateName(r.state)) == "preempting");
  CHECK(q.pool().free_cpu_workers() == 0);
  CHECK_FALSE(q.Move(r, RunState::kRunning).ok());
  REQUIRE(q.Move(r, RunState::kQueued).ok());
  CHECK(q.pool().free_cpu_workers() == 2);
  REQUIRE(q.Move(r, RunState::kRunning).ok());
  REQUIRE(q.Move(r, RunState::kPreempting).ok());
  REQUIRE(q.Move(r, RunState::kStopping).ok());  // cancelled while it stopped
  CHECK(q.pool().free_cpu_workers() == 0);
  REQUIRE(q.Move(r, RunState::kCancelled).ok());
  CHECK(q.pool().free_cpu_workers() == 2);
}

}  // namespace
}  // namespace ens
