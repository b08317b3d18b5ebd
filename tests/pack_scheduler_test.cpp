#include "orchestrator/run/pack_scheduler.h"

#include <catch2/catch.hpp>

#include <map>
#include <utility>

namespace ens {
namespace {

using PS = PackState;
using PE = PackEvent;

PackScheduler Make(std::vector<std::vector<int>> packs, size_t members, int max_attempts,
                   std::vector<bool> done = {}) {
  if (done.empty()) done.assign(members, false);
  auto s = PackScheduler::Create(std::move(packs), members, done, max_attempts);
  REQUIRE(s.ok());
  return std::move(*s);
}

MemberReport Done(int member, int attempt) { return {MemberReport::kDone, member, attempt, false, false}; }
MemberReport Failed(int member, int attempt, bool permanent = false) {
  return {MemberReport::kFailed, member, attempt, permanent, false};
}
MemberReport Lost(int member, int attempt, bool killed_unasked = false) {
  return {MemberReport::kLost, member, attempt, false, killed_unasked};
}

// Dispatches the next pack, requiring it to be `pack` at `attempt` with exactly `members`.
void DispatchExpect(PackScheduler& s, int pack, int attempt, std::vector<int> members) {
  auto d = s.NextDispatch();
  REQUIRE(d.has_value());
  CHECK(d->pack == pack);
  CHECK(d->attempt == attempt);
  CHECK(d->members == members);
  REQUIRE(s.Dispatched(d->pack).ok());
}

ReportVerdict::Outcome Report(PackScheduler& s, const MemberReport& r) {
  ReportVerdict v = s.OnReport(r);
  CHECK(v.status.ok());
  return v.outcome;
}

const PS kAllStates[] = {PS::kQueued, PS::kInFlight, PS::kRetryPending, PS::kDraining, PS::kHeld, PS::kDone};
const PE kAllEvents[] = {PE::kDispatched,   PE::kReported, PE::kRetryDecided,
                         PE::kAttemptEnded, PE::kSettled,  PE::kStopRequested};

TEST_CASE("the transition table holds exactly the documented transitions - every other pair is illegal",
          "[pack_scheduler]") {
  // Written out again from the header's comment, so a row added, dropped or redirected in
  // the code's table shows up here.
  const std::map<std::pair<PS, PE>, PS> legal = {
      {{PS::kQueued, PE::kDispatched}, PS::kInFlight},
      {{PS::kQueued, PE::kStopRequested}, PS::kHeld},
      {{PS::kInFlight, PE::kReported}, PS::kInFlight},
      {{PS::kInFlight, PE::kRetryDecided}, PS::kRetryPending},
      {{PS::kInFlight, PE::kSettled}, PS::kDone},
      {{PS::kInFlight, PE::kStopRequested}, PS::kDraining},
      {{PS::kRetryPending, PE::kReported}, PS::kRetryPending},
      {{PS::kRetryPending, PE::kAttemptEnded}, PS::kQueued},
      {{PS::kRetryPending, PE::kSettled}, PS::kDone},
      {{PS::kRetryPending, PE::kStopRequested}, PS::kDraining},
      {{PS::kDraining, PE::kReported}, PS::kDraining},
      {{PS::kDraining, PE::kRetryDecided}, PS::kDraining},
      {{PS::kDraining, PE::kSettled}, PS::kDone},
      {{PS::kDraining, PE::kAttemptEnded}, PS::kHeld},
      {{PS::kDraining, PE::kStopRequested}, PS::kDraining},
      {{PS::kHeld, PE::kStopRequested}, PS::kHeld},
      {{PS::kDone, PE::kStopRequested}, PS::kDone},
  };
  int checked = 0, legal_seen = 0;
  for (PS from : kAllStates)
    for (PE event : kAllEvents) {
      INFO(PackStateName(from) << " on " << PackEventName(event));
      std::optional<PS> to = PackScheduler::Next(from, event);
      auto it = legal.find({from, event});
      if (it == legal.end()) {
        CHECK_FALSE(to.has_value());
      } else {
        REQUIRE(to.has_value());
        CHECK(*to == it->second);
        ++legal_seen;
      }
      ++checked;
    }
  CHECK(checked == kPackStateCount * kPackEventCount);
  CHECK(legal_seen == static_cast<int>(legal.size()));
}

TEST_CASE("a stop is legal from every state and nothing leaves kDone or kHeld but a stop", "[pack_scheduler]") {
  for (PS from : kAllStates) CHECK(PackScheduler::Next(from, PE::kStopRequested).has_value());
  for (PE event : kAllEvents) {
    if (event == PE::kStopRequested) continue;
    CHECK_FALSE(PackScheduler::Next(PS::kDone, event).has_value());
    CHECK_FALSE(PackScheduler::Next(PS::kHeld, event).has_value());
  }
  // Once stopped, no state reachable by any event is kQueued: nothing new can start.
  for (PS from : {PS::kDraining, PS::kHeld, PS::kDone})
    for (PE event : kAllEvents) {
      auto to = PackScheduler::Next(from, event);
      if (to) CHECK(*to != PS::kQueued);
    }
}

TEST_CASE("Create refuses a plan that does not cover every member exactly once", "[pack_scheduler]") {
  CHECK_FALSE(PackScheduler::Create({{0, 1}, {1}}, 2, {false, false}, 3).ok());  // member 1 twice
  CHECK_FALSE(PackScheduler::Create({{0}}, 2, {false, false}, 3).ok());          // member 1 in no pack
  CHECK_FALSE(PackScheduler::Create({{0, 2}}, 2, {false, false}, 3).ok());       // out of range
  CHECK_FALSE(PackScheduler::Create({{0}, {}, {1}}, 2, {false, false}, 3).ok()); // an empty pack
  CHECK_FALSE(PackScheduler::Create({{0}, {1}}, 2, {false}, 3).ok());            // done flags short
  CHECK(PackScheduler::Create({{0}, {1}}, 2, {false, false}, 3).ok());
}

TEST_CASE("illegal calls are refused with a Status and change nothing", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}, {2}}, 3, 3);
  SECTION("a report about a queued pack") {
    ReportVerdict v = s.OnReport(Done(0, 1));
    CHECK_FALSE(v.status.ok());
    CHECK(v.outcome == ReportVerdict::kIgnored);
    CHECK(s.state(0) == PS::kQueued);
    CHECK_FALSE(s.decided(0));
    CHECK(s.done_count() == 0);
  }
  SECTION("dispatching a pack in flight, or one that does not exist") {
    DispatchExpect(s, 0, 1, {0, 1});
    Status st = s.Dispatched(0);
    CHECK_FALSE(st.ok());
    CHECK(st.code() == Status::Code::kInternal);
    CHECK(s.state(0) == PS::kInFlight);
    CHECK(s.reports_owed(0) == 2);
    CHECK_FALSE(s.Dispatched(7).ok());
    CHECK_FALSE(s.Dispatched(-1).ok());
  }
  SECTION("a report of another attempt than the one in flight") {
    DispatchExpect(s, 0, 1, {0, 1});
    ReportVerdict v = s.OnReport(Done(0, 2));
    CHECK_FALSE(v.status.ok());
    CHECK(v.outcome == ReportVerdict::kIgnored);
    CHECK(s.reports_owed(0) == 2);
    CHECK_FALSE(s.decided(0));
  }
  SECTION("a report about a member not in the round") {
    CHECK_FALSE(s.OnReport(Done(3, 1)).status.ok());
    CHECK_FALSE(s.OnReport(Done(-1, 1)).status.ok());
  }
  SECTION("a report about a pack already done") {
    DispatchExpect(s, 0, 1, {0, 1});
    CHECK(Report(s, Done(0, 1)) == ReportVerdict::kDone);
    CHECK(Report(s, Done(1, 1)) == ReportVerdict::kDone);
    REQUIRE(s.state(0) == PS::kDone);
    ReportVerdict v = s.OnReport(Failed(1, 1));
    CHECK_FALSE(v.status.ok());
    CHECK(v.outcome == ReportVerdict::kIgnored);
    CHECK(s.member_state(1) == MemberState::kDone);
    CHECK(s.failed_count() == 0);
  }
}

TEST_CASE("a round of packs that all succeed - dispatch in pack order, complete when every member is decided",
          "[pack_scheduler]") {
  PackScheduler s = Make({{0, 2}, {1}}, 3, 3);
  CHECK_FALSE(s.Complete());
  DispatchExpect(s, 0, 1, {0, 2});
  DispatchExpect(s, 1, 1, {1});
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK(s.reports_owed(0) == 2);
  CHECK(Report(s, Done(2, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kInFlight);
  CHECK(s.reports_owed(0) == 1);
  CHECK(Report(s, Done(1, 1)) == ReportVerdict::kDone);
  CHECK(s.state(1) == PS::kDone);
  CHECK_FALSE(s.Complete());
  CHECK(Report(s, Done(0, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.Complete());
  CHECK(s.done_count() == 3);
  CHECK(s.failed_count() == 0);
  CHECK(s.attempts(0) == 1);
}

TEST_CASE("a resumed round skips journaled members - a pack of only those is done at once", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}, {2, 3}}, 4, 3, {true, true, false, true});
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.done_count() == 3);
  DispatchExpect(s, 1, 1, {2});
  CHECK(s.reports_owed(1) == 1);
  CHECK(s.attempts(3) == 0);  // not sent this round
  CHECK(Report(s, Done(2, 1)) == ReportVerdict::kDone);
  CHECK(s.Complete());
}

TEST_CASE("the retry budget - a transient failure is retried up to max_attempts then the member fails",
          "[pack_scheduler]") {
  PackScheduler s = Make({{0}}, 1, 3);
  DispatchExpect(s, 0, 1, {0});
  CHECK(Report(s, Failed(0, 1)) == ReportVerdict::kRetry);
  CHECK(s.state(0) == PS::kQueued);  // a pack of one: its only report ended the attempt
  CHECK(s.current_attempt(0) == 2);
  DispatchExpect(s, 0, 2, {0});
  CHECK(Report(s, Lost(0, 2)) == ReportVerdict::kRetry);
  DispatchExpect(s, 0, 3, {0});
  CHECK(s.attempts(0) == 3);
  CHECK(Report(s, Failed(0, 3)) == ReportVerdict::kGaveUp);
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.member_state(0) == MemberState::kFailed);
  CHECK(s.failed_count() == 1);
  CHECK_FALSE(s.any_permanent());
  CHECK(s.Complete());
  CHECK_FALSE(s.NextDispatch().has_value());
}

TEST_CASE("max_attempts 1 - the first transient failure gives up", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}}, 2, 1);
  DispatchExpect(s, 0, 1, {0, 1});
  CHECK(Report(s, Lost(0, 1)) == ReportVerdict::kGaveUp);
  CHECK(s.state(0) == PS::kInFlight);
  CHECK(Report(s, Done(1, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.failed_count() == 1);
  CHECK(s.done_count() == 1);
}

TEST_CASE("a fused pack that loses its worker is retried once the last task is reported - less its done members",
          "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1, 2, 3}}, 4, 3);
  DispatchExpect(s, 0, 1, {0, 1, 2, 3});
  CHECK(Report(s, Done(0, 1)) == ReportVerdict::kDone);
  // The worker dies: WorkerPool reports each task it still held as lost.
  CHECK(Report(s, Lost(1, 1)) == ReportVerdict::kRetry);
  CHECK(s.state(0) == PS::kRetryPending);
  CHECK(s.current_attempt(0) == 2);
  CHECK_FALSE(s.NextDispatch().has_value());  // members 2 and 3 still owe their reports
  CHECK(Report(s, Lost(2, 1)) == ReportVerdict::kIgnored);  // the retry is already queued
  CHECK(s.state(0) == PS::kRetryPending);
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK(Report(s, Lost(3, 1)) == ReportVerdict::kIgnored);
  CHECK(s.state(0) == PS::kQueued);
  DispatchExpect(s, 0, 2, {1, 2, 3});
  CHECK(s.attempts(0) == 1);
  CHECK(s.attempts(3) == 2);
  for (int i : {1, 2, 3}) CHECK(Report(s, Done(i, 2)) == ReportVerdict::kDone);
  CHECK(s.Complete());
  CHECK(s.done_count() == 4);
}

TEST_CASE("a permanent failure in a pack whose attempt was already retried still fails that member",
          "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1, 2}}, 3, 3);
  DispatchExpect(s, 0, 1, {0, 1, 2});
  CHECK(Report(s, Failed(0, 1)) == ReportVerdict::kRetry);
  CHECK(Report(s, Failed(1, 1, /*permanent=*/true)) == ReportVerdict::kPermanent);
  CHECK(s.member_state(1) == MemberState::kFailed);
  CHECK(Report(s, Done(2, 1)) == ReportVerdict::kDone);
  DispatchExpect(s, 0, 2, {0});  // only the member that failed transiently
  CHECK(Report(s, Done(0, 2)) == ReportVerdict::kDone);
  CHECK(s.Complete());
  CHECK(s.any_permanent());
  CHECK(s.failed_count() == 1);
}

TEST_CASE("a permanent failure is not retried - its pack-mates report for themselves", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}}, 2, 3);
  DispatchExpect(s, 0, 1, {0, 1});
  CHECK(Report(s, Failed(0, 1, true)) == ReportVerdict::kPermanent);
  CHECK(s.state(0) == PS::kInFlight);
  CHECK(s.current_attempt(0) == 1);
  CHECK(s.any_permanent());
  CHECK(Report(s, Done(1, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.Complete());
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK(s.failed_count() == 1);
  CHECK(s.done_count() == 1);
}

TEST_CASE("SIGKILLs not ours in every attempt count as permanent - out of memory", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}}, 2, 2);
  DispatchExpect(s, 0, 1, {0, 1});
  CHECK(Report(s, Lost(0, 1, true)) == ReportVerdict::kRetry);
  CHECK(Report(s, Lost(1, 1, true)) == ReportVerdict::kIgnored);  // stale, but its kill counts
  DispatchExpect(s, 0, 2, {0, 1});
  ReportVerdict v = s.OnReport(Lost(0, 2, true));
  CHECK(v.status.ok());
  CHECK(v.outcome == ReportVerdict::kPermanent);
  CHECK(v.out_of_memory);
  v = s.OnReport(Lost(1, 2, true));
  CHECK(v.outcome == ReportVerdict::kPermanent);
  CHECK(v.out_of_memory);
  CHECK(s.any_permanent());
  CHECK(s.failed_count() == 2);
  CHECK(s.Complete());
}

TEST_CASE("a SIGKILL not ours in only some attempts is an ordinary transient failure", "[pack_scheduler]") {
  PackScheduler s = Make({{0}}, 1, 2);
  DispatchExpect(s, 0, 1, {0});
  CHECK(Report(s, Lost(0, 1, false)) == ReportVerdict::kRetry);
  DispatchExpect(s, 0, 2, {0});
  ReportVerdict v = s.OnReport(Lost(0, 2, true));
  CHECK(v.outcome == ReportVerdict::kGaveUp);
  CHECK_FALSE(v.out_of_memory);
  CHECK_FALSE(s.any_permanent());
}

TEST_CASE("a retry queues behind the packs queued before it", "[pack_scheduler]") {
  PackScheduler s = Make({{0}, {1}, {2}}, 3, 3);
  DispatchExpect(s, 0, 1, {0});
  DispatchExpect(s, 1, 1, {1});
  CHECK(Report(s, Failed(0, 1)) == ReportVerdict::kRetry);
  DispatchExpect(s, 2, 1, {2});
  DispatchExpect(s, 0, 2, {0});
  CHECK_FALSE(s.NextDispatch().has_value());
}

TEST_CASE("stop while in flight - queued packs are held, packs in flight drain and finish", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}, {2}, {3}}, 4, 3);
  DispatchExpect(s, 0, 1, {0, 1});
  s.RequestStop();
  CHECK(s.stopping());
  CHECK(s.state(0) == PS::kDraining);
  CHECK(s.state(1) == PS::kHeld);
  CHECK(s.state(2) == PS::kHeld);
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK_FALSE(s.Dispatched(1).ok());  // a held pack never starts
  CHECK(Report(s, Done(0, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kDraining);
  CHECK(Report(s, Done(1, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.done_count() == 2);
  CHECK_FALSE(s.Complete());  // the held packs are for the next run
  s.RequestStop();            // a second stop changes nothing
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.state(1) == PS::kHeld);
}

TEST_CASE("stop while in flight - a transient failure while draining is noted but never started",
          "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}}, 2, 3);
  DispatchExpect(s, 0, 1, {0, 1});
  s.RequestStop();
  CHECK(Report(s, Failed(0, 1)) == ReportVerdict::kRetry);
  CHECK(s.state(0) == PS::kDraining);
  CHECK(s.current_attempt(0) == 2);
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK(Report(s, Lost(1, 1)) == ReportVerdict::kIgnored);  // covered by the noted retry
  CHECK(s.state(0) == PS::kHeld);
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK_FALSE(s.decided(0));
  CHECK_FALSE(s.decided(1));
  CHECK_FALSE(s.Complete());
}

TEST_CASE("stop while a retry waits for pack-mates - the pack drains, then is held", "[pack_scheduler]") {
  PackScheduler s = Make({{0, 1}}, 2, 3);
  DispatchExpect(s, 0, 1, {0, 1});
  CHECK(Report(s, Lost(0, 1)) == ReportVerdict::kRetry);
  REQUIRE(s.state(0) == PS::kRetryPending);
  s.RequestStop();
  CHECK(s.state(0) == PS::kDraining);
  CHECK(Report(s, Done(1, 1)) == ReportVerdict::kDone);
  CHECK(s.state(0) == PS::kHeld);
  CHECK_FALSE(s.NextDispatch().has_value());
  CHECK(s.done_count() == 1);
}

TEST_CASE("stop while draining - the last member failing permanently settles the pack", "[pack_scheduler]") {
  PackScheduler s = Make({{0}}, 1, 3);
  DispatchExpect(s, 0, 1, {0});
  s.RequestStop();
  CHECK(Report(s, Failed(0, 1, true)) == ReportVerdict::kPermanent);
  CHECK(s.state(0) == PS::kDone);
  CHECK(s.Complete());
}

}  // namespace
}  // namespace ens
