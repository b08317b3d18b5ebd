#include "orchestrator/run/round_runner.h"

#include <poll.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "common/base/fault_injection.h"
#include "common/state/member_result.h"
#include "orchestrator/run/pack_plan.h"

namespace ens {

using Clock = std::chrono::steady_clock;

RoundEnd RoundRunner::Run(Status* error) {
  // The dispatch unit is a pack (a single member when packing is off). A member's bits do not
  // depend on its pack, so the plan may follow the worker count.
  bool gpu = false;  // a GPU worker could train any pack
  for (const WorkerSlot& s : workers_->slots()) gpu = gpu || !s.placement.gpu.empty();
  auto plan = PackScheduler::Create(
      PlanPacks(cfg_.members, cfg_.pack_size, static_cast<int>(workers_->slots().size()),
                PackShape{shape_.features, shape_.train_rows, shape_.classes, shape_.targets, gpu}),
      cfg_.members.size(), shape_.done_before, cfg_.max_task_attempts);
  if (!plan.ok()) {
    *error = plan.status();
    return RoundEnd::kFailed;
  }
  sched_ = std::move(*plan);
  // Every member decided, and every done one journaled.
  while (!sched_.Complete() || !done_batch_.empty()) {
    const RoundHost::Stop stop = host_->StopState();
    if (stop != RoundHost::Stop::kNone && !sched_.stopping()) sched_.RequestStop();  // nothing new starts
    if (!host_->Paused()) DispatchIdle();
    if (stop != RoundHost::Stop::kNone && workers_->BusyCount() == 0) return Stopped(error);
    if (stop == RoundHost::Stop::kOverdue) {
      spdlog::warn("stop_timeout_s passed: stopping the running tasks");
      return Stopped(error);
    }
    Wait();
    if (!host_->Tick(sched_.failed_count())) return Stopped(error);
    std::vector<PoolEvent> events = workers_->Service();
    if (std::string why = workers_->Unusable(); !why.empty()) {  // a restart cannot help
      *error = Status::InvalidArgument(why);
      return RoundEnd::kFailed;
    }
    for (PoolEvent& e : events) {
      if (e.task.round != shape_.round) continue;  // a late report about an earlier round's task
      if (Status s = HandleEvent(e); !s.ok()) {
        *error = s;
        return RoundEnd::kFailed;
      }
    }
    // Pipelined: a worker that just reported gets its next task now, while its members wait
    // for the batch's one fdatasync (a crash before it loses only unjournaled members, which
    // the resumed run retrains to the same bits).
    if (!host_->Paused()) DispatchIdle();
    if (FlushDue()) {
      if (Status s = FlushDone("round " + std::to_string(shape_.round)); !s.ok()) {
        *error = s;
        return RoundEnd::kFailed;
      }
    }
  }
  return Outcome(error);
}

// A retry waits until every task of the pack's previous attempt has reported (done, failed or
// lost): only then is it known which members are journaled. A re-run pack trains only its
// undecided members: a member's bits do not depend on its pack, and a journaled directory is
// never rewritten.
void RoundRunner::DispatchIdle() {
  while (std::optional<PackDispatch> next = sched_.NextDispatch()) {
    if (workers_->IdleCount() == 0) break;  // spares building a pack's tasks for nothing
    std::vector<TaskSpec> tasks;
    for (int i : next->members) tasks.push_back(host_->MakeTask(shape_.round, i, next->attempt));
    if (!workers_->Assign(tasks)) break;
    if (Status s = sched_.Dispatched(next->pack); !s.ok()) {
      spdlog::error("round {}: {}", shape_.round, s.message());
      break;
    }
    CrashPoint("after_dispatch");
  }
}

void RoundRunner::Wait() const {
  std::vector<struct pollfd> fds{{workers_->report_fd(), POLLIN, 0}};
  for (int fd : host_->WaitFds())
    if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  ::poll(fds.data(), fds.size(), 200);
}

Status RoundRunner::HandleEvent(PoolEvent& e) {
  const std::string& name = e.task.member.name;
  const int index = e.task.member_index;
  MemberResult result;
  if (e.kind == PoolEvent::kDone && !sched_.decided(index)) {
    auto r = LoadMemberResult(e.task.out_dir, shape_.holdout_values, shape_.pool_values);
    if (r.ok()) {
      result = std::move(*r);
    } else {
      e.kind = PoolEvent::kFailed;
      e.error = "results unreadable: " + r.status().message();
    }
  }
  MemberReport report;
  report.kind = e.kind == PoolEvent::kDone     ? MemberReport::kDone
                : e.kind == PoolEvent::kFailed ? MemberReport::kFailed
                                               : MemberReport::kLost;
  report.member = index;
  report.attempt = e.task.attempt;
  report.permanent = e.permanent;
  report.killed_unasked = e.killed_unasked;
  const ReportVerdict v = sched_.OnReport(report);
  if (!v.status.ok()) spdlog::error("round {}: {}", shape_.round, v.status.message());
  if (v.outcome == ReportVerdict::kIgnored) return Status::Ok();
  const int pack = sched_.pack_of(index);
  if (v.outcome == ReportVerdict::kDone) {
    if (done_batch_.empty()) batch_started_ = Clock::now();
    // The record journals a copy of the metrics; the result keeps them for the commit.
    done_batch_.push_back({MemberDoneRecord{shape_.round, name, index, e.task.attempt, e.slot, e.pid, result.metrics},
                           e.task.out_dir, std::move(result)});
    return Status::Ok();
  }
  if (v.out_of_memory) {
    // Killed by a SIGKILL ensembled did not send in every attempt: most likely the kernel's
    // out-of-memory killer, and then a restart cannot help (exit 78, not a restart loop).
    const size_t size = sched_.pack_size(pack);
    e.error += "; killed by SIGKILL in all " + std::to_string(e.task.attempt) +
               " attempts, not by ensembled: most likely the kernel's out-of-memory killer (" +
               (size > 1 ? "pack of " + std::to_string(size) + "; a smaller pack_size or fewer workers per machine may fit)"
                         : "alone; fewer workers per machine may fit)");
    e.permanent = true;
  }
  if (first_failure_.empty() && (v.outcome == ReportVerdict::kPermanent || v.outcome == ReportVerdict::kGaveUp))
    first_failure_ = "member " + name + ": " + e.error;
  if (v.outcome == ReportVerdict::kPermanent) {
    // Deterministic (NaN loss, a spec that cannot build): retrying cannot help, and it is
    // this member's own failure; its pack-mates report for themselves.
    spdlog::warn("round {} member {} attempt {} failed: {} (permanent, not retried)", shape_.round, name,
                 e.task.attempt, e.error);
    return JournalFailure(e, name);
  }
  const bool give_up = v.outcome == ReportVerdict::kGaveUp;
  spdlog::warn("round {} member {} attempt {} failed: {}{}", shape_.round, name, e.task.attempt, e.error,
               give_up ? " (giving up)" : " (will retry)");
  if (!give_up) {  // the pack again, less its decided members
    host_->MemberRetried();
    return Status::Ok();
  }
  // Out of attempts: this member fails. Its pack-mates' own reports of this last attempt
  // (done, failed or lost; every task of a pack gets one) decide theirs.
  return JournalFailure(e, name);
}

// As with member_done: a journal that cannot take a record is not appended to again (the
// write may have left part of a line); the round stops with its error.
Status RoundRunner::JournalFailure(const PoolEvent& e, const std::string& name) {
  Status s = journal_->Append(
      MemberFailedRecord{shape_.round, name, e.task.member_index, e.task.attempt, e.error, e.permanent});
  if (!s.ok()) {
    spdlog::error("journal: cannot record round {} member {}'s failure", shape_.round, name);
    return s;
  }
  host_->MemberFailedJournaled();
  return Status::Ok();
}

bool RoundRunner::FlushDue() const {
  if (done_batch_.empty()) return false;
  // Grouped: one fdatasync for every member that finished while the workers went on: when no
  // task is running (the round's last reports, a pause, the workers waiting for a retry), or
  // once the oldest record has waited kMaxBatchWait.
  return workers_->BusyCount() == 0 || sched_.Complete() || Clock::now() - batch_started_ > kMaxBatchWait;
}

Status RoundRunner::FlushDone(const std::string& when) {
  if (done_batch_.empty()) return Status::Ok();
  std::vector<nlohmann::json> recs;
  for (const auto& d : done_batch_) recs.push_back(ToRecord(d.rec));
  if (Status s = journal_->AppendBatch(std::move(recs)); !s.ok())
    return Status::IOError(when + ": cannot journal " + std::to_string(done_batch_.size()) + " finished member(s) (" +
                           s.message() + "); their results are not recorded: the resumed run trains them again");
  for (auto& d : done_batch_) {
    CrashPoint("after_member_done");
    host_->MemberJournaled(d.rec, d.out_dir, std::move(d.result));
  }
  std::fflush(stdout);  // the host prints a line per member: one write per batch
  done_batch_.clear();
  return Status::Ok();
}

RoundEnd RoundRunner::Stopped(Status* error) {
  if (Status s = FlushDone("stopping in round " + std::to_string(shape_.round)); !s.ok()) {
    *error = s;
    return RoundEnd::kFailed;
  }
  return RoundEnd::kStopped;
}

RoundEnd RoundRunner::Outcome(Status* error) const {
  const size_t failed = sched_.failed_count();
  const size_t finished = sched_.done_count();
  const size_t needed = cfg_.min_members > 0 ? static_cast<size_t>(cfg_.min_members) : cfg_.members.size();
  if (finished < needed) {
    // Retries exhausted on failures that were not permanent (crashes, I/O): a restart may help.
    auto make = sched_.any_permanent() ? Status::InvalidArgument : Status::IOError;
    *error = make("round " + std::to_string(shape_.round) + ": " + std::to_string(failed) + " member(s) failed, " +
                  std::to_string(finished) + " succeeded, " + std::to_string(needed) +
                  " needed (min_members); first failure: " + first_failure_);
    return RoundEnd::kFailed;
  }
  if (failed > 0)
    spdlog::warn("round {}: {} member(s) failed; continuing with {} (min_members {})", shape_.round, failed, finished,
                 needed);
  return RoundEnd::kComplete;
}

}  // namespace ens
