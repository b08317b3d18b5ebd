#include "orchestrator/run/pack_scheduler.h"

#include <array>

namespace ens {
namespace {

struct Transition {
  PackState from;
  PackEvent event;
  PackState to;
};

// The table of pack_scheduler.h, row for row.
constexpr std::array<Transition, 17> kTransitions = {{
    {PackState::kQueued, PackEvent::kDispatched, PackState::kInFlight},
    {PackState::kQueued, PackEvent::kStopRequested, PackState::kHeld},
    {PackState::kInFlight, PackEvent::kReported, PackState::kInFlight},
    {PackState::kInFlight, PackEvent::kRetryDecided, PackState::kRetryPending},
    {PackState::kInFlight, PackEvent::kSettled, PackState::kDone},
    {PackState::kInFlight, PackEvent::kStopRequested, PackState::kDraining},
    {PackState::kRetryPending, PackEvent::kReported, PackState::kRetryPending},
    {PackState::kRetryPending, PackEvent::kAttemptEnded, PackState::kQueued},
    {PackState::kRetryPending, PackEvent::kSettled, PackState::kDone},
    {PackState::kRetryPending, PackEvent::kStopRequested, PackState::kDraining},
    {PackState::kDraining, PackEvent::kReported, PackState::kDraining},
    {PackState::kDraining, PackEvent::kRetryDecided, PackState::kDraining},
    {PackState::kDraining, PackEvent::kSettled, PackState::kDone},
    {PackState::kDraining, PackEvent::kAttemptEnded, PackState::kHeld},
    {PackState::kDraining, PackEvent::kStopRequested, PackState::kDraining},
    {PackState::kHeld, PackEvent::kStopRequested, PackState::kHeld},
    {PackState::kDone, PackEvent::kStopRequested, PackState::kDone},
}};

// A report is taken only while the pack owes reports of a dispatched attempt.
bool TakesReports(PackState s) {
  return s == PackState::kInFlight || s == PackState::kRetryPending || s == PackState::kDraining;
}

}  // namespace

const char* PackStateName(PackState s) {
  switch (s) {
    case PackState::kQueued: return "queued";
    case PackState::kInFlight: return "in flight";
    case PackState::kRetryPending: return "retry pending";
    case PackState::kDraining: return "draining";
    case PackState::kHeld: return "held";
    case PackState::kDone: return "done";
  }
  return "?";
}

const char* PackEventName(PackEvent e) {
  switch (e) {
    case PackEvent::kDispatched: return "dispatched";
    case PackEvent::kReported: return "reported";
    case PackEvent::kRetryDecided: return "retry decided";
    case PackEvent::kAttemptEnded: return "attempt ended";
    case PackEvent::kSettled: return "settled";
    case PackEvent::kStopRequested: return "stop requested";
  }
  return "?";
}

std::optional<PackState> PackScheduler::Next(PackState from, PackEvent event) {
  for (const Transition& t : kTransitions)
    if (t.from == from && t.event == event) return t.to;
  return std::nullopt;
}

StatusOr<PackScheduler> PackScheduler::Create(std::vector<std::vector<int>> packs, size_t members,
                                              const std::vector<bool>& done, int max_attempts) {
  if (done.size() != members)
    return Status::InvalidArgument("pack scheduler: " + std::to_string(done.size()) + " done flags for " +
                                   std::to_string(members) + " members");
  PackScheduler s;
  s.max_attempts_ = max_attempts;
  s.members_.resize(members);
  s.pack_of_.assign(members, -1);
  s.packs_.resize(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    if (packs[p].empty()) return Status::InvalidArgument("pack scheduler: pack " + std::to_string(p) + " is empty");
    for (int i : packs[p]) {
      if (i < 0 || static_cast<size_t>(i) >= members || s.pack_of_[static_cast<size_t>(i)] >= 0)
        return Status::InvalidArgument("pack scheduler: member " + std::to_string(i) + " of pack " +
                                       std::to_string(p) + " is out of range or in two packs");
      s.pack_of_[static_cast<size_t>(i)] = static_cast<int>(p);
      if (done[static_cast<size_t>(i)]) s.Decide(i, MemberState::kDone);
    }
    s.packs_[p].members = std::move(packs[p]);
  }
  for (size_t i = 0; i < members; ++i)
    if (s.pack_of_[i] < 0) return Status::InvalidArgument("pack scheduler: member " + std::to_string(i) + " is in no pack");
  for (size_t p = 0; p < s.packs_.size(); ++p) {
    bool all_done = true;
    for (int i : s.packs_[p].members) all_done = all_done && s.decided(i);
    if (all_done) {
      s.packs_[p].state = PackState::kDone;
      ++s.packs_done_;
    } else {
      s.queue_.push_back(static_cast<int>(p));
    }
  }
  return s;
}

std::optional<PackDispatch> PackScheduler::NextDispatch() const {
  for (int p : queue_) {
    const Pack& pack = packs_[static_cast<size_t>(p)];
    if (pack.state != PackState::kQueued) continue;  // kRetryPending: its old attempt still reports
    PackDispatch d{p, pack.current_attempt, {}};
    for (int i : pack.members)
      if (!decided(i)) d.members.push_back(i);
    return d;
  }
  return std::nullopt;
}

Status PackScheduler::Dispatched(int pack) {
  if (pack < 0 || pack >= pack_count()) return Status::InvalidArgument("pack scheduler: no pack " + std::to_string(pack));
  Status s = Apply(pack, PackEvent::kDispatched);
  if (!s.ok()) return s;
  Pack& p = packs_[static_cast<size_t>(pack)];
  p.dispatched_attempt = p.current_attempt;
  p.owed = 0;
  for (int i : p.members) {
    if (decided(i)) continue;
    members_[static_cast<size_t>(i)].attempts = p.current_attempt;
    ++p.owed;
  }
  std::erase(queue_, pack);
  return Status::Ok();
}

ReportVerdict PackScheduler::OnReport(const MemberReport& r) {
  ReportVerdict v;
  if (r.member < 0 || static_cast<size_t>(r.member) >= members_.size()) {
    v.status = Status::InvalidArgument("pack scheduler: a report about member " + std::to_string(r.member) +
                                       ", which is not in this round");
    return v;
  }
  const int pack = pack_of(r.member);
  Pack& p = packs_[static_cast<size_t>(pack)];
  if (!TakesReports(p.state) || r.attempt != p.dispatched_attempt) {
    v.status = Status::Internal("pack " + std::to_string(pack) + " (" + PackStateName(p.state) + ", attempt " +
                                std::to_string(p.dispatched_attempt) + "): a report about member " +
                                std::to_string(r.member) + " attempt " + std::to_string(r.attempt) +
                                " it does not owe; ignored");
    return v;
  }
  if (p.owed > 0) --p.owed;
  Member& m = members_[static_cast<size_t>(r.member)];
  bool retry = false;
  if (m.state != MemberState::kUndecided) {
    v.outcome = ReportVerdict::kIgnored;
  } else if (r.kind == MemberReport::kDone) {
    Decide(r.member, MemberState::kDone);
    v.outcome = ReportVerdict::kDone;
  } else {
    if (r.kind == MemberReport::kLost && r.killed_unasked) ++m.unasked_kills;
    bool permanent = r.permanent;
    if (r.attempt >= max_attempts_ && m.unasked_kills >= r.attempt && r.attempt >= p.current_attempt) {
      v.out_of_memory = true;
      permanent = true;
    }
    if (permanent) {
      Decide(r.member, MemberState::kFailed);
      any_permanent_ = true;
      v.outcome = ReportVerdict::kPermanent;
    } else if (r.attempt < p.current_attempt) {
      v.outcome = ReportVerdict::kIgnored;  // a pack-mate's failure already queued the retry
    } else if (r.attempt < max_attempts_) {
      p.current_attempt = r.attempt + 1;
      retry = true;
      v.outcome = ReportVerdict::kRetry;
    } else {
      Decide(r.member, MemberState::kFailed);
      v.outcome = ReportVerdict::kGaveUp;
    }
  }
  if (retry) {
    v.status = Apply(pack, PackEvent::kRetryDecided);
    if (p.state == PackState::kRetryPending) queue_.push_back(pack);
  }
  PackEvent end = PackEvent::kReported;
  if (p.owed == 0) {
    bool all_decided = true;
    for (int i : p.members) all_decided = all_decided && decided(i);
    end = all_decided ? PackEvent::kSettled : PackEvent::kAttemptEnded;
  }
  Status s = Apply(pack, end);
  if (v.status.ok()) v.status = s;
  if (p.state == PackState::kDone || p.state == PackState::kHeld) std::erase(queue_, pack);
  return v;
}

void PackScheduler::RequestStop() {
  stopping_ = true;
  for (int p = 0; p < pack_count(); ++p) (void)Apply(p, PackEvent::kStopRequested);  // legal from every state
  queue_.clear();
}

bool PackScheduler::Complete() const { return packs_done_ == packs_.size(); }

Status PackScheduler::Apply(int pack, PackEvent event) {
  Pack& p = packs_[static_cast<size_t>(pack)];
  std::optional<PackState> to = Next(p.state, event);
  if (!to)
    return Status::Internal("pack " + std::to_string(pack) + ": no transition from " + PackStateName(p.state) +
                            " on " + PackEventName(event));
  if (*to == PackState::kDone && p.state != PackState::kDone) ++packs_done_;
  p.state = *to;
  return Status::Ok();
}

void PackScheduler::Decide(int member, MemberState state) {
  members_[static_cast<size_t>(member)].state = state;
  if (state == MemberState::kDone) ++done_;
  if (state == MemberState::kFailed) ++failed_;
}

}  // namespace ens
