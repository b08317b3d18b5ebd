#include "worker/device/dispatch_count.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>

namespace ens {
namespace {

// Operators that launch no kernel of their own.
bool Uncounted(std::string_view name) {
  static const std::set<std::string_view> kNames = {
      "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::view", "aten::_unsafe_view",
      "aten::view_as", "aten::reshape", "aten::_reshape_alias", "aten::narrow", "aten::select",
      "aten::slice", "aten::transpose", "aten::t", "aten::permute", "aten::expand", "aten::expand_as",
      "aten::as_strided", "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::alias",
      "aten::lift_fresh", "aten::to", "aten::contiguous", "aten::resize_", "aten::unbind", "aten::split",
      "aten::chunk", "aten::result_type", "aten::is_nonzero", "aten::set_", "aten::requires_grad_",
      "aten::unflatten", "aten::flatten", "aten::numpy_T", "aten::_has_compatible_shallow_copy_type"};
  return kNames.count(name) > 0;
}

struct State {
  std::mutex mu;
  std::map<std::string, int64_t> by_name;
  std::atomic<int64_t> total{0};
};
State& Counts() {
  static State* s = new State();  // never destroyed: callbacks may run at exit
  return *s;
}

thread_local int depth = 0;  // counted operators open on this thread

struct Opened : at::ObserverContext {
  bool counted = false;
};

std::unique_ptr<at::ObserverContext> OnEnter(const at::RecordFunction& fn) {
  auto ctx = std::make_unique<Opened>();
  const char* name = fn.name();
  if (Uncounted(name)) return ctx;
  ctx->counted = true;
  if (depth++ == 0) {
    State& s = Counts();
    s.total.fetch_add(1);
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.by_name[name];
  }
  return ctx;
}

void OnExit(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr && static_cast<Opened*>(ctx)->counted) --depth;
}

}  // namespace

DispatchCount::DispatchCount() {
  Reset();
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(OnEnter, OnExit).scopes({at::RecordScope::FUNCTION}));
}

DispatchCount::~DispatchCount() { at::removeCallback(handle_); }

int64_t DispatchCount::total() const { return Counts().total.load(); }

std::map<std::string, int64_t> DispatchCount::by_name() const {
  std::lock_guard<std::mutex> lock(Counts().mu);
  return Counts().by_name;
}

void DispatchCount::Reset() {
  State& s = Counts();
  std::lock_guard<std::mutex> lock(s.mu);
  s.by_name.clear();
  s.total = 0;
}

}  // namespace ens
