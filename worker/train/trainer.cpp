#include "worker/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "common/base/atomic_file.h"
#include "common/base/fault_injection.h"
#include "common/config/run_head.h"
#include "common/state/run_layout.h"
#include "common/base/seed.h"
#include "worker/predict/checkpoint.h"
#include "worker/device/cpu_only.h"
#include "worker/device/device_runtime.h"
#include "worker/kernels/holdout_metrics.h"
#include "worker/kernels/mlp_kernel.h"
#include "worker/models/model.h"
#include "worker/device/dispatch_count.h"
#include "worker/train/lane_step.h"
#include "worker/train/objective.h"
#include "worker/train/pack_optimizer.h"
#include "worker/train/pack_step.h"

namespace ens {

// One dataset generation on the training device. On the CPU a view of the mapping (no
// copy); on a GPU one copy, kept across tasks: rows are only ever appended, so a later
// generation of the same table copies just the new rows, and an earlier one is a prefix.
class DeviceDataCache {
 public:
  torch::Tensor Rows(const TrainInputs& in, DeviceRuntime& rt) {
    const torch::Device dev = rt.device();
    const TaskSpec& t = *in.task;
    const int64_t n = static_cast<int64_t>(t.rows), stride = in.features + in.targets;
    torch::Tensor host = torch::from_blob(const_cast<float*>(in.rows), {n, stride});
    if (!dev.is_cuda()) return host;
    if (!data_.defined() || dir_ != t.data_dir || data_.size(1) != stride || data_.device() != dev) {
      data_ = rt.ToDevice(host);
      dir_ = t.data_dir;
    } else if (data_.size(0) < n) {
      data_ = torch::cat({data_, rt.ToDevice(host.narrow(0, data_.size(0), n - data_.size(0)))});
    }
    return data_.narrow(0, 0, n);
  }

 private:
  std::string dir_;
  torch::Tensor data_;
};

void DeviceDataCacheDeleter::operator()(DeviceDataCache* c) const { delete c; }
DeviceDataCachePtr NewDeviceDataCache() { return DeviceDataCachePtr(new DeviceDataCache()); }

namespace {

using Clock = std::chrono::steady_clock;

// The runtime of inputs that name none: the CPU.
DeviceRuntime& RuntimeOf(const TrainInputs& in) {
  static DeviceRuntime* cpu = NewDeviceRuntime(DeviceChoice::kCpu).release();  // never destroyed: used until exit
  return in.runtime != nullptr ? *in.runtime : *cpu;
}

// What a member predicts. Every member of a pack has the same head (PackKey equal).
RunHead HeadOf(const TrainInputs& in) { return RunHead::For(in.task->member.loss, in.task->classes, in.targets); }
// A member's outputs: one per class, a mean and a raw variance (a Gaussian head), or one per target.
int OutputsOf(const TrainInputs& in) { return HeadOf(in).OutputWidth(); }

// A member's own state through the loop.
struct MemberRun {
  const TrainInputs* in = nullptr;
  const MemberSpec* spec = nullptr;
  std::optional<EpochOrder> order;
  double best_value = INFINITY;
  int best_epoch = -1, since_best = 0, epochs_run = 0;
  int64_t stop_step = 0;
  bool stopped = false;
  std::vector<torch::Tensor> kept;  // its parameter slices at best (restore_best) or at its stop
  int epochs = 0;                   // its budget: epochs, or warm_start_epochs when warm
  bool is_warm = false;             // warm_start members: started from the previous round's state
  std::string warm;                 // and the metric saying so: "warm" or "cold: <why>"
  PackOptimizer::Moments moments;   // warm_start members: the optimizer's state at its stop
  int64_t moments_step = 0;         // and the steps it had taken then
};

// Why `state` cannot seed member k of a model with `params` (and an optimizer of `kind`), or
// "" when it fits: the same parameter shapes and the moments that optimizer keeps.
std::string WarmMismatch(const TrainState& state, const std::vector<torch::Tensor>& params, int64_t k,
                         OptimizerKind kind) {
  if (state.params.size() != params.size()) return "the architecture changed (parameter count)";
  for (size_t i = 0; i < params.size(); ++i)
    if (state.params[i].sizes() != params[i][k].sizes()) return "the architecture changed (parameter shapes)";
  const size_t want_v = kind == OptimizerKind::kSgd ? 0 : params.size();
  if (state.m.size() != params.size() || state.v.size() != want_v) return "the optimizer changed";
  return "";
}

// Mean and std (population, floored) of every column (features, then targets) of a member's
// training split, in double, row order.
void Standardise(const TrainInputs& in, std::vector<float>* mean, std::vector<float>* stdv, std::vector<float>* range,
                 nlohmann::json* norm) {
  const int f = in.features, w = in.features + in.targets;
  std::vector<double> sum(w, 0.0), sq(w, 0.0), lo(w, INFINITY), hi(w, -INFINITY);
  std::vector<int64_t> chunk(4096);
  const uint64_t total = in.split.train_size();
  for (uint64_t pos = 0; pos < total; pos += chunk.size()) {
    const uint64_t len = std::min<uint64_t>(chunk.size(), total - pos);
    in.split.Train(pos, len, chunk.data());
    for (uint64_t i = 0; i < len; ++i) {
      const float* row = in.rows + chunk[i] * w;
      for (int c = 0; c < w; ++c) {
        sum[c] += row[c];
        sq[c] += static_cast<double>(row[c]) * row[c];
        lo[c] = std::min<double>(lo[c], row[c]);
        hi[c] = std::max<double>(hi[c], row[c]);
      }
    }
  }
  const double n = static_cast<double>(total);
  mean->resize(w);
  stdv->resize(w);
  range->assign(f, 0.0f);
  for (int c = 0; c < f && total > 0; ++c) (*range)[c] = static_cast<float>(hi[c] - lo[c]);
  for (int c = 0; c < w; ++c) {
    (*mean)[c] = static_cast<float>(sum[c] / n);
    double var = std::max(0.0, sq[c] / n - (sum[c] / n) * (sum[c] / n));
    (*stdv)[c] = static_cast<float>(std::max(std::sqrt(var), 1e-6));
  }
  // The targets' part: a number for one target, a list for several.
  auto y = [&](const std::vector<float>& v) -> nlohmann::json {
    if (in.targets == 1) return v[f];
    return std::vector<float>(v.begin() + f, v.end());
  };
  *norm = {{"x_mean", std::vector<float>(mean->begin(), mean->begin() + f)},
           {"x_std", std::vector<float>(stdv->begin(), stdv->begin() + f)},
           {"y_mean", y(*mean)},
           {"y_std", y(*stdv)}};
}

// Every member's standardisation, stacked for the pack: x [K,1,F], y [K,1] (several
// targets: [K,1,T]).
struct PackNorm {
  torch::Tensor xm, xs, ym, ys;
  // Adversarial training's step per member and feature in standardised units [K, 1, F]:
  // adversarial_eps x the feature's range over the member's training rows / its std.
  // Undefined when no member of the pack trains adversarially.
  torch::Tensor adversarial_step;
  // Member k's own copy (its own storage: a view would save the whole pack's statistics).
  torch::Tensor Member(const torch::Tensor& t, int64_t k) const { return t[k].reshape({-1}).clone(); }
};

// A classifier's target is a class index: its "standardisation" is the identity (0, 1).
PackNorm StandardiseAll(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out, torch::Device dev) {
  const bool classify = in[0].task->classes > 0;
  const int f = in[0].features;
  std::vector<torch::Tensor> xm, xs, ym, ys, step;
  bool adversarial = false;
  for (size_t k = 0; k < in.size(); ++k) {
    std::vector<float> mean, stdv, range;
    Standardise(in[k], &mean, &stdv, &range, &(*out)[k].norm);
    const double eps = in[k].task->member.adversarial_eps;
    adversarial = adversarial || eps > 0;
    std::vector<float> s(f);
    for (int c = 0; c < f; ++c) s[c] = static_cast<float>(eps * range[c] / stdv[c]);
    step.push_back(torch::tensor(s));
    if (classify) {
      mean[f] = 0.0f, stdv[f] = 1.0f;
      (*out)[k].norm["y_mean"] = 0.0f, (*out)[k].norm["y_std"] = 1.0f;
    }
    xm.push_back(torch::tensor(std::vector<float>(mean.begin(), mean.begin() + f)));
    xs.push_back(torch::tensor(std::vector<float>(stdv.begin(), stdv.begin() + f)));
    ym.push_back(torch::tensor(std::vector<float>(mean.begin() + f, mean.end())));
    ys.push_back(torch::tensor(std::vector<float>(stdv.begin() + f, stdv.end())));
  }
  auto stack = [&](std::vector<torch::Tensor>& v) { return torch::stack(v).unsqueeze(1).to(dev); };
  const torch::Tensor adversarial_step = adversarial ? stack(step) : torch::Tensor();
  if (in[0].targets > 1) return {stack(xm), stack(xs), stack(ym), stack(ys), adversarial_step};
  return {stack(xm), stack(xs), stack(ym).squeeze(-1), stack(ys).squeeze(-1), adversarial_step};
}

// The windows of whole batches of positions [0, n) of K members' row lists: calls
// body(ix) with ix [K, len] (the rows of one window, on the device). The whole list when the
// pack's indices fit in `window_bytes` (one copy to the device per epoch), else as many
// windows as that bound needs; the copy does not wait for the device. Batch boundaries are
// the whole list's, so the window size changes no result.
template <class Fill, class Body>
void ForEachWindow(int64_t members, int64_t n, int64_t batch, int64_t window_bytes, DeviceRuntime& rt, Fill fill,
                   Body body) {
  const int64_t per_batch = members * batch * static_cast<int64_t>(sizeof(int64_t));
  const int64_t window = batch * std::max<int64_t>(1, window_bytes / per_batch);
  for (int64_t pos = 0; pos < n; pos += window) {
    const int64_t len = std::min(window, n - pos);
    torch::Tensor t = torch::empty({members, len}, torch::kLong);
    int64_t* p = t.data_ptr<int64_t>();
    for (int64_t k = 0; k < members; ++k) fill(k, pos, len, p + k * len);
    body(rt.ToDeviceAsync(t));
  }
}

// The same a batch at a time: body(ix) with ix [K, len] the rows of one batch.
template <class Fill, class Body>
void ForEachBatch(int64_t members, int64_t n, int64_t batch, DeviceRuntime& rt, Fill fill, Body body) {
  ForEachWindow(members, n, batch, kIndexWindowBytes, rt, fill, [&](const torch::Tensor& ix) {
    const int64_t len = ix.size(1);
    for (int64_t b = 0; b < len; b += batch) body(ix.narrow(1, b, std::min(batch, len - b)));
  });
}

// The value early stopping watches; val_mae and val_mse are regression metrics 0 and 1 (a
// classifier monitors val_loss: config.h).
double Monitored(Monitor monitor, double loss, const std::vector<double>& metrics) {
  switch (monitor) {
    case Monitor::kValMae: return metrics[0];
    case Monitor::kValMse: return metrics[1];
    case Monitor::kValLoss: break;
  }
  return loss;
}

// The test hook (fault_injection.h): NaN in the listed members' loss slots, else undefined.
torch::Tensor PoisonMask(const std::vector<TrainInputs>& in, torch::Device dev) {
  std::vector<float> v(in.size(), 1.0f);
  bool any = false;
  for (size_t k = 0; k < in.size(); ++k)
    if (NonFiniteLossRequested(in[k].task->task_id)) v[k] = std::nanf(""), any = true;
  return any ? torch::tensor(v).to(dev) : torch::Tensor();
}

class PackLoop {
 public:
  // status() says whether the pack's model could be built (model.h: BuildModel); Run only
  // when it is Ok.
  PackLoop(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out, DeviceRuntime& rt,
           const std::vector<std::optional<TrainState>>& warm)
      : in_(in), out_(*out), rt_(rt), dev_(rt.device()), runs_(in.size()) {
    std::vector<ModelMember> mm;
    std::vector<const MemberSpec*> specs;
    for (size_t k = 0; k < in.size(); ++k) {
      const TaskSpec& t = *in[k].task;
      MemberRun& r = runs_[k];
      r.in = &in[k];
      r.spec = &t.member;
      r.order.emplace(in[k].split);
      specs.push_back(&t.member);
      mm.push_back({&t.member, StreamSeed(t.seed, SeedStream::kInit), StreamSeed(t.seed, SeedStream::kDropout)});
    }
    // One table of the epoch shuffles' bounds for the pack (listed members: at most 2^20 rows).
    uint64_t listed_rows = 0;
    for (const TrainInputs& i : in)
      if (i.split.listed()) listed_rows = std::max<uint64_t>(listed_rows, i.split.train_size());
    if (listed_rows > 0) shuffle_bounds_ = ShuffleBounds(listed_rows);
    norm_ = StandardiseAll(in, out, dev_);
    const int classes = in[0].task->classes;
    const int outputs = OutputsOf(in[0]);
    auto model = BuildModel(mm, in[0].features, outputs, dev_);
    if (!model.ok()) {
      status_ = model.status();
      return;
    }
    model_ = std::move(*model);
    const TrainPath path = in[0].path;
    tensor_ops_ = path != TrainPath::kByDevice;
    if (tensor_ops_) model_->UseTensorOps();
    // Predictions: a lane member's by the lane kernel's forward when its task says so (a task
    // recorded before keeps the GEMMs it was predicted with), whichever engine trains the pack.
    if (in[0].task->lane_predictions && LaneStepFits(specs, classes, in[0].targets, in[0].features))
      model_->UseLaneForward();
    // The same for every member of the pack: made once, not once per member's outputs.
    forward_source_ = model_->MemberForwardSource();
    statements_ = model_->MemberStatements();
    objective_ = classes > 0 ? MakeClassificationObjective(specs, dev_)
                             : MakeRegressionObjective(specs, norm_.ym, norm_.ys, dev_, tensor_ops_);
    const std::vector<int64_t> offsets = WarmStart(warm);
    for (const auto& r : runs_) max_epochs_ = std::max(max_epochs_, r.epochs);
    // Lanes first: on the CPU its vector lanes, on a device with a launcher one launch a window;
    // a member's bits are the same either way, alone or in any pack.
    const bool lanes_here = dev_.is_cpu() || in[0].lanes != nullptr;
    if (lanes_here && path == TrainPath::kByDevice && model_->Layers().has_value() &&
        LaneStepFits(specs, classes, in[0].targets, in[0].features)) {
      lanes_ = std::make_unique<LaneStep>(*model_, specs,
                                          PackStepNorm{norm_.xm, norm_.xs, norm_.ym, norm_.ys, norm_.adversarial_step}, offsets,
                                          in[0].lanes, in[0].lanes != nullptr ? &rt_ : nullptr);
      for (size_t k = 0; k < in.size(); ++k)
        if (runs_[k].is_warm) lanes_->SetMemberMoments(static_cast<int64_t>(k), {warm[k]->m, warm[k]->v});
      return;
    }
    const bool cuda_path = dev_.is_cuda() || path == TrainPath::kTensorOps;
    if (cuda_path && path != TrainPath::kAutogradOps && PackStepFits(specs, classes, in[0].targets) &&
        model_->Layers().has_value()) {
      step_ = std::make_unique<PackStep>(*model_, specs, PackStepNorm{norm_.xm, norm_.xs, norm_.ym, norm_.ys});
      return;
    }
    // L1/L2 of the kernels: gradient terms of the optimizer's step (pack_optimizer.h).
    optimizer_ = std::make_unique<PackOptimizer>(specs, model_->Parameters(), offsets, model_->Kernels(),
                                                 tensor_ops_ ? StepPath::kTensorOps : StepPath::kByDevice);
    for (size_t k = 0; k < in.size(); ++k)
      if (runs_[k].is_warm)
        optimizer_->SetMemberMoments(static_cast<int64_t>(k), {warm[k]->m, warm[k]->v});
  }

  void Run(const torch::Tensor& all) {
    torch::Tensor poison = PoisonMask(in_, dev_);
    if (step_) step_->SetPoison(poison);
    if (lanes_) lanes_->SetPoison(poison);
    std::optional<DispatchCount> count;
    if (in_[0].count_ops) count.emplace();
    int64_t train_ops = 0;
    for (int epoch = 0; epoch < max_epochs_; ++epoch) {
      auto t0 = Clock::now();
      const int64_t ops_before = count ? count->total() : 0;
      EpochSums sums = TrainEpoch(all, epoch, poison);
      if (count) train_ops += count->total() - ops_before;
      EpochSums val = in_[0].split.val_size() > 0 ? Evaluate(all, epoch) : EpochSums{};  // validation_split 0: none
      double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (EndEpoch(epoch, sums, val, secs)) break;
    }
    if (count && steps_ > 0) ops_per_step_ = static_cast<double>(train_ops) / static_cast<double>(steps_);
  }

  // On a GPU: every member's kept parameters and the pack's standardisation reach the host in
  // one copy per stacked tensor (a parameter of all members at once), not one per member and
  // tensor, so the member files, predictions and metrics after it read host memory only.
  void ResultsToHost() {
    if (!rt_.accelerated()) return;
    torch::NoGradGuard ng;
    std::vector<size_t> kept;  // members with parameters (one that failed has none)
    for (size_t k = 0; k < runs_.size(); ++k)
      if (!runs_[k].kept.empty()) kept.push_back(k);
    for (size_t i = 0; !kept.empty() && i < runs_[kept[0]].kept.size(); ++i) {
      std::vector<torch::Tensor> slices;
      for (size_t k : kept) slices.push_back(runs_[k].kept[i]);
      const torch::Tensor host = rt_.ToHost(torch::stack(slices));
      for (size_t j = 0; j < kept.size(); ++j) runs_[kept[j]].kept[i] = host[static_cast<int64_t>(j)];
    }
    for (torch::Tensor* t : {&norm_.xm, &norm_.xs, &norm_.ym, &norm_.ys}) *t = rt_.ToHost(*t);
  }

  // Which engine trained the pack (member metric "engine"): "lanes" (the lane kernel, on the
  // CPU or through a device's launcher: the same bits on every device), "pack_step" or "autograd".
  const char* engine() const { return lanes_ ? "lanes" : step_ ? "pack_step" : "autograd"; }

  // Operators dispatched per optimizer step by the training epochs (TrainInputs::count_ops), or -1.
  double ops_per_step() const { return ops_per_step_; }

  // After Run: each member's stand-alone parts (its kept parameters and standardisation).
  MemberParts Parts(size_t k) const {
    const MemberRun& r = runs_[k];
    return {*r.spec, r.in->task->classes, model_->MemberTensors(r.kept), forward_source_,
            statements_, model_->MemberNet(r.kept), norm_.Member(norm_.xm, k), norm_.Member(norm_.xs, k),
            norm_.Member(norm_.ym, k), norm_.Member(norm_.ys, k)};
  }
  const MemberRun& run(size_t k) const { return runs_[k]; }
  const Status& status() const { return status_; }

 private:
  struct EpochSums {  // [K] doubles on the CPU
    torch::Tensor loss;
    std::vector<torch::Tensor> metrics;  // objective_->MetricNames() order
  };

  // Each member's budget, and each warm member's weights from its previous round's state;
  // returns the optimizer steps every member has taken before (0 when cold).
  std::vector<int64_t> WarmStart(const std::vector<std::optional<TrainState>>& warm) {
    const std::vector<torch::Tensor> params = model_->Parameters();
    std::vector<int64_t> offsets(runs_.size(), 0);
    for (size_t k = 0; k < runs_.size(); ++k) {
      MemberRun& r = runs_[k];
      r.epochs = r.spec->epochs;
      if (!r.spec->warm_start) continue;
      r.warm = "cold: round 0, or no state of the round before";
      if (!warm[k]) continue;
      const auto ki = static_cast<int64_t>(k);
      const std::string why = WarmMismatch(*warm[k], params, ki, r.spec->optimizer);
      if (!why.empty()) {
        r.warm = "cold: " + why;
        continue;
      }
      torch::NoGradGuard ng;
      for (size_t i = 0; i < params.size(); ++i) params[i][ki].copy_(warm[k]->params[i]);
      offsets[k] = warm[k]->step;
      r.epochs = r.spec->warm_start_epochs;
      r.is_warm = true;
      r.warm = "warm";
    }
    return offsets;
  }

  // A batch's targets: [K, B] for one, [K, B, T] for several (objective.h).
  torch::Tensor Targets(const torch::Tensor& rows) const {
    const int f = in_[0].features, t = in_[0].targets;
    return t == 1 ? rows.select(2, f) : rows.narrow(2, f, t);
  }

  // The batch of rows `ix` [K, len] of `all`: standardised features x [K, len, F] and the
  // targets (Targets' shapes). On the CPU one pass over the rows, each feature
  // (value - mean) / std in float as the elementwise kernels compute it (the same bits), where
  // a gather and two kernels over the whole pack cost about a tenth of a pack's loop.
  std::pair<torch::Tensor, torch::Tensor> Batch(const torch::Tensor& all, const torch::Tensor& ix) const {
    const int f = in_[0].features, t = in_[0].targets;
    if (!all.is_cpu() || tensor_ops_) {
      torch::Tensor rows = all.index({ix});  // [K, len, F+T]
      return {(rows.narrow(2, 0, f) - norm_.xm) / norm_.xs, Targets(rows)};
    }
    TORCH_CHECK(all.is_contiguous() && all.scalar_type() == torch::kFloat32, "the row table must be contiguous float32");
    const int64_t members = ix.size(0), len = ix.size(1);
    torch::Tensor x = torch::empty({members, len, f}, all.options());
    torch::Tensor y = t == 1 ? torch::empty({members, len}, all.options()) : torch::empty({members, len, t}, all.options());
    const torch::Tensor xm = norm_.xm.contiguous(), xs = norm_.xs.contiguous();
    RequireCpu("the batch gather", {all, ix, xm, xs});
    GatherStandardised(all.data_ptr<float>(), all.size(1), ix.data_ptr<int64_t>(), ix.stride(0), ix.stride(1), members,
                       len, f, t, xm.data_ptr<float>(), xs.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>());
    return {x, y};
  }

  // Sums that accumulate on the device, one [K] double tensor per metric.
  std::vector<torch::Tensor> ZeroSums(const torch::Tensor& like) const {
    std::vector<torch::Tensor> v;
    for (size_t i = 0; i < objective_->MetricNames().size(); ++i) v.push_back(like.clone());
    return v;
  }
  static void AddSums(std::vector<torch::Tensor>& acc, const std::vector<torch::Tensor>& add) {
    for (size_t i = 0; i < acc.size(); ++i) acc[i].add_(add[i]);
  }

  // One epoch of every member: the autograd loop a batch at a time, or PackStep or LaneStep a
  // window of batches at a time (their sums once a window or epoch).
  EpochSums TrainEpoch(const torch::Tensor& all, int epoch, const torch::Tensor& poison) {
    for (auto& r : runs_)
      if (!r.stopped) r.order->NextEpoch(shuffle_bounds_);
    const int64_t members = static_cast<int64_t>(runs_.size());
    const int64_t n = static_cast<int64_t>(in_[0].split.train_size()), batch = runs_[0].spec->batch_size;
    auto acc = torch::TensorOptions().device(dev_).dtype(torch::kDouble);
    torch::Tensor loss_sum = torch::zeros({members}, acc);
    std::vector<torch::Tensor> sums = ZeroSums(loss_sum);
    auto fill = [&](int64_t k, int64_t pos, int64_t len, int64_t* out) { runs_[k].order->Rows(pos, len, out); };
    auto stepped = [&] {
      ++steps_;
      if (in_[0].on_progress) in_[0].on_progress(TaskPhase::kTraining, epoch + 1);
    };
    if (lanes_) {
      const std::vector<bool> running = Running();
      ForEachWindow(members, n, batch, kPackStepWindowBytes, rt_, fill, [&](const torch::Tensor& ix) {
        lanes_->Window(all, ix, batch, running);
        for (int64_t b = 0; b < ix.size(1); b += batch) stepped();
      });
      lanes_->EndEpoch(loss_sum, sums);
    } else if (step_) {
      auto to_device = [&](const torch::Tensor& host) { return rt_.ToDeviceAsync(host); };
      ForEachWindow(members, n, batch, kPackStepWindowBytes, rt_, fill, [&](const torch::Tensor& ix) {
        step_->BeginWindow(all, ix, batch, to_device);
        for (int64_t b = 0; b < ix.size(1); b += batch) {
          step_->Step(b, std::min(batch, ix.size(1) - b));
          stepped();
        }
        step_->EndWindow(loss_sum, sums);
      });
    } else {
      ForEachBatch(members, n, batch, rt_, fill, [&](const torch::Tensor& ix) {
        auto [x, y] = Batch(all, ix);
        const bool adversarial = norm_.adversarial_step.defined();
        if (adversarial) x.requires_grad_(true);
        torch::Tensor pred = model_->Forward(x, true);
        torch::Tensor elem = objective_->ElementLoss(pred, y);
        if (poison.defined()) elem = elem * poison.unsqueeze(1);
        torch::Tensor total = elem.mean(-1).sum();
        if (adversarial) {
          // Fast gradient sign: the batch moved by each member's step in the direction that
          // raises its loss; the step trains on both (each member's own slice throughout).
          const torch::Tensor gx = torch::autograd::grad({total}, {x}, {}, /*retain_graph=*/true)[0];
          torch::Tensor x_adv;
          {
            torch::NoGradGuard ng;
            x_adv = x.detach() + norm_.adversarial_step * gx.sign();
          }
          torch::Tensor elem_adv = objective_->ElementLoss(model_->Forward(x_adv, true), y);
          if (poison.defined()) elem_adv = elem_adv * poison.unsqueeze(1);
          total = total + elem_adv.mean(-1).sum();
        }
        optimizer_->ZeroGrad();
        total.backward();
        optimizer_->Step();
        torch::NoGradGuard ng;
        loss_sum.add_(Objective::RowSums(elem.detach()));
        AddSums(sums, objective_->MetricSums(pred.detach(), y));
        stepped();
      });
    }
    for (auto& t : sums) t = rt_.ToHost(t);
    return {rt_.ToHost(loss_sum), std::move(sums)};
  }

  // Validation loss and metrics per member (means over the rows). In chunks of the
  // batch size: the matrix products then have the training steps' shapes, and BLAS picks a
  // kernel by shape, so a shape that trains pack-invariant also validates pack-invariant.
  // A LaneStep pack validates in its lanes (FusedMlp's forward operations, batch by batch).
  EpochSums Evaluate(const torch::Tensor& all, int epoch) {
    torch::NoGradGuard ng;
    const int64_t members = static_cast<int64_t>(runs_.size());
    const int64_t n = static_cast<int64_t>(in_[0].split.val_size()), batch = runs_[0].spec->batch_size;
    auto acc = torch::TensorOptions().device(dev_).dtype(torch::kDouble);
    torch::Tensor loss = torch::zeros({members}, acc);
    std::vector<torch::Tensor> sums = ZeroSums(loss);
    auto fill = [&](int64_t k, int64_t pos, int64_t len, int64_t* out) { in_[k].split.Val(pos, len, out); };
    if (lanes_) {
      const std::vector<bool> running = Running();
      ForEachWindow(members, n, batch, kPackStepWindowBytes, rt_, fill, [&](const torch::Tensor& ix) {
        lanes_->Validate(all, ix, batch, running);
        for (int64_t b = 0; b < ix.size(1) && in_[0].on_progress; b += batch)
          in_[0].on_progress(TaskPhase::kEvaluating, epoch + 1);
      });
      lanes_->EndValidation(loss, sums);
    } else {
      ForEachBatch(members, n, batch, rt_, fill, [&](const torch::Tensor& ix) {
        auto [x, y] = Batch(all, ix);
        torch::Tensor pred = model_->Forward(x, false);
        loss.add_(Objective::RowSums(objective_->ElementLoss(pred, y)));
        AddSums(sums, objective_->MetricSums(pred, y));
        if (in_[0].on_progress) in_[0].on_progress(TaskPhase::kEvaluating, epoch + 1);
      });
    }
    auto cpu = [&](const torch::Tensor& t) { return rt_.ToHost(t / static_cast<double>(n)); };
    for (auto& t : sums) t = cpu(t);
    return {cpu(loss), std::move(sums)};
  }

  // Which members still train (LaneStep skips blocks with none).
  std::vector<bool> Running() const {
    std::vector<bool> running(runs_.size());
    for (size_t k = 0; k < runs_.size(); ++k) running[k] = !runs_[k].stopped;
    return running;
  }

  // One epoch's bookkeeping for every running member; true when all have stopped.
  bool EndEpoch(int epoch, const EpochSums& s, const EpochSums& v, double secs) {
    const double n = static_cast<double>(in_[0].split.train_size());
    // The sums as host arrays: an item() per member and value cost more than a small pack's epoch.
    auto values = [](const torch::Tensor& t) {
      return t.defined() ? t.to(torch::kCPU, torch::kDouble).contiguous() : torch::Tensor();
    };
    const torch::Tensor s_loss = values(s.loss), v_loss = values(v.loss);
    std::vector<torch::Tensor> s_metrics, v_metrics;
    for (const auto& t : s.metrics) s_metrics.push_back(values(t));
    for (const auto& t : v.metrics) v_metrics.push_back(values(t));
    auto at = [](const torch::Tensor& t, int64_t k) { return t.data_ptr<double>()[k]; };
    std::vector<std::string> val_names;  // the history's keys, made once an epoch, not once a member
    for (const std::string& name : objective_->MetricNames()) val_names.push_back("val_" + name);
    bool all_stopped = true;
    for (size_t k = 0; k < runs_.size(); ++k) {
      MemberRun& r = runs_[k];
      if (r.stopped) continue;
      const auto ki = static_cast<int64_t>(k);
      // Without validation rows (validation_split 0) the epoch's training loss stands in where
      // a value is watched (no early stopping then: the config refuses it), and the history has
      // no val_* keys.
      const bool validated = v.loss.defined();
      double loss = at(s_loss, ki) / n, vl = validated ? at(v_loss, ki) : loss;
      if (!std::isfinite(loss) || !std::isfinite(vl)) {
        // Only this member's slice is non-finite: nothing in the loop mixes members.
        out_[k].permanent_failure = true;
        out_[k].status = Status::InvalidArgument("member " + r.spec->name + ": loss became non-finite at epoch " +
                                                 std::to_string(epoch + 1) +
                                                 (runs_.size() > 1 ? " (pack of " + std::to_string(runs_.size()) + ")" : ""));
        r.stopped = true;
        continue;
      }
      const auto& names = objective_->MetricNames();
      nlohmann::json h = {{"epoch", epoch + 1}, {"loss", loss}};
      if (validated) h["val_loss"] = vl;
      std::vector<double> val(names.size());
      for (size_t i = 0; i < names.size(); ++i) h[names[i]] = val[i] = at(s_metrics[i], ki) / n;
      for (size_t i = 0; validated && i < names.size(); ++i) h[val_names[i]] = val[i] = at(v_metrics[i], ki);
      h["lr"] = r.spec->lr;
      h["seconds"] = secs;
      out_[k].history.push_back(std::move(h));
      r.epochs_run = epoch + 1;
      UpdateStopping(k, Monitored(r.spec->early_stopping.monitor, vl, val));
      all_stopped = all_stopped && r.stopped;
    }
    return all_stopped;
  }

  // Early stopping and the epoch limit of member k, with the value it monitors.
  void UpdateStopping(size_t k, double value) {
    MemberRun& r = runs_[k];
    const EarlyStoppingSpec& es = r.spec->early_stopping;
    const bool keep_best = es.enabled && es.restore_best;
    if (value < r.best_value - es.min_delta) {
      r.best_value = value;
      r.best_epoch = r.epochs_run;
      r.since_best = 0;
      if (keep_best) Snapshot(k);
    } else if (es.enabled && ++r.since_best > es.patience) {
      r.stopped = true;
    }
    if (r.epochs_run >= r.epochs) r.stopped = true;
    if (r.stopped) {
      r.stop_step = steps_;
      if (!keep_best) Snapshot(k);  // frozen from here: later updates of its slice are discarded
      if (r.spec->warm_start && optimizer_) {  // what its next round continues from (PackStep: none warm)
        r.moments = optimizer_->MemberMoments(static_cast<int64_t>(k));
        r.moments_step = optimizer_->MemberSteps(static_cast<int64_t>(k));
      } else if (r.spec->warm_start && lanes_) {
        r.moments = lanes_->MemberMoments(static_cast<int64_t>(k));
        r.moments_step = lanes_->MemberSteps(static_cast<int64_t>(k));
      }
    }
  }

  // Member k's parameter slices into its kept tensors. On the CPU a member's slice of a stacked
  // contiguous parameter is one run of floats: copied into the tensors of its last snapshot (made
  // at its first), no operators (select, detach and clone cost ~9 us a member, which a pack
  // whose members all stop in one epoch paid K times inside its loop).
  void Snapshot(size_t k) {
    std::vector<torch::Tensor>& kept = runs_[k].kept;
    const std::vector<torch::Tensor> params = model_->Parameters();
    if (kept.size() != params.size()) kept.assign(params.size(), torch::Tensor());
    for (size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor& p = params[i];
      if (!p.is_cpu() || !p.is_contiguous() || p.scalar_type() != torch::kFloat32) {
        kept[i] = p[static_cast<int64_t>(k)].detach().clone();
        continue;
      }
      if (!kept[i].defined()) kept[i] = torch::empty(p.sizes().slice(1), p.options().requires_grad(false));
      const int64_t n = p.stride(0);
      std::memcpy(kept[i].data_ptr<float>(), p.data_ptr<float>() + static_cast<int64_t>(k) * n,
                  static_cast<size_t>(n) * sizeof(float));
    }
  }

  const std::vector<TrainInputs>& in_;
  std::vector<TrainOutputs>& out_;
  DeviceRuntime& rt_;
  torch::Device dev_;
  std::vector<MemberRun> runs_;
  std::vector<DrawBound> shuffle_bounds_;  // ShuffleBounds of the largest listed member's training rows
  PackNorm norm_;
  Status status_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Objective> objective_;
  std::unique_ptr<PackOptimizer> optimizer_;  // the autograd loop's
  std::unique_ptr<PackStep> step_;            // or the CUDA path's PackStep (after model_: it holds a view of it)
  std::unique_ptr<LaneStep> lanes_;           // or the CPU's LaneStep (it writes the model's tensors)
  bool tensor_ops_ = false;                   // TrainPath other than kByDevice
  double ops_per_step_ = -1;
  int max_epochs_ = 0;
  int64_t steps_ = 0;
  std::string forward_source_;                // Model::MemberForwardSource, once a pack
  std::vector<MemberStatement> statements_;   // Model::MemberStatements, once a pack
};

// The outputs of the member at index `at` of `loop`, at `position` in its pack (the same index
// unless a refit's loop trained it): its checkpoint (weights.bin, or the module of a kind
// without MemberStatements, built then), predictions and final metrics.
void FinishMember(const PackLoop& loop, size_t at, size_t position, size_t pack_size, double train_seconds,
                  MemberModuleBuilder* builder, const std::string& device, TrainOutputs* o) {
  const MemberRun& r = loop.run(at);
  const TrainInputs& in = *r.in;
  if (in.on_progress) in.on_progress(TaskPhase::kPredicting, r.epochs_run);
  SlowPhaseIfTold(Name(TaskPhase::kPredicting));
  const MemberParts parts = loop.Parts(at);
  const bool eager = !parts.statements.empty() && !parts.net;  // the same bits as the module's forward
  std::optional<torch::jit::Module> module;
  if (!eager) {
    auto built = builder->Build(parts);
    if (!built.ok()) {
      o->status = built.status();
      o->permanent_failure = true;
      return;
    }
    module = std::move(*built);
  }
  if (in.checkpoint_path.empty() && in.checkpoint_in_memory) {
    auto bytes = eager ? MemberWeightsFileBytes(parts) : ModuleBytes(*module);
    o->status = bytes.status();
    if (bytes.ok()) o->checkpoint = std::move(*bytes);
    o->checkpoint_file = eager ? MemberFiles::kWeightsName : MemberFiles::kCheckpointName;
    if (!o->status.ok()) return;
  } else if (!in.checkpoint_path.empty()) {
    // Not flushed here: the caller makes the pack's files durable in one batch. A failed
    // write is transient.
    if (eager) {
      auto bytes = MemberWeightsFileBytes(parts);
      o->status = bytes.ok() ? WriteFileUnsynced(in.checkpoint_path, *bytes) : bytes.status();
    } else {
      o->status = SaveModule(*module, in.checkpoint_path, /*durable=*/false);
    }
    if (!o->status.ok()) return;
  }
  const int f = in.features;
  auto predict = [&](const float* p, uint64_t n) {
    torch::Tensor x = torch::from_blob(const_cast<float*>(p), {static_cast<int64_t>(n), f + in.targets}).narrow(1, 0, f);
    return eager ? PredictRows(parts, x) : PredictRows(*module, x);
  };
  o->holdout_pred = predict(in.holdout, in.holdout_rows);
  o->pool_pred = predict(in.pool, in.pool_rows);
  o->metrics.update(HoldoutMetrics(HeadOf(in), in.holdout, in.holdout_rows, in.features, o->holdout_pred));  // after a refit's
  o->metrics.update({{"epochs_run", r.epochs_run},       {"best_epoch", r.best_epoch},
                {"stop_step", r.stop_step},
                {"device", device},
                {"engine", loop.engine()},
                {"train_seconds", train_seconds / static_cast<double>(pack_size)}});
  if (loop.ops_per_step() >= 0) o->metrics["train_ops_per_step"] = loop.ops_per_step();
  if (in.split.val_size() > 0) o->metrics["best_val_loss"] = r.best_value;  // validation_split 0: none
  if (pack_size > 1)
    o->metrics.update({{"pack_size", pack_size}, {"pack_position", position}, {"pack_train_seconds", train_seconds}});
  if (r.spec->warm_start) {
    o->metrics["warm_start"] = r.warm;
    o->train_state = TrainStateBytes({r.moments_step, r.kept, r.moments.m, r.moments.v});
  }
}

// early_stopping.refit (config.h): the second part of the members that chose their training
// length. Its own inputs (each member's spec for the second part, its split with every row
// training), outputs and loop; of[k] is member k's place in them, or -1 (no refit, or its
// search failed).
struct Refit {
  std::vector<TaskSpec> tasks;
  std::vector<TrainInputs> in;
  std::vector<TrainOutputs> out;
  std::vector<int> of;
  std::unique_ptr<PackLoop> loop;
};

// Why member r's search chose the length it did, in words (metric "length_rule").
std::string LengthRule(const MemberRun& r, uint64_t refit_rows) {
  const EarlyStoppingSpec& es = r.spec->early_stopping;
  const std::string stop = r.epochs_run >= r.epochs
                               ? "the budget of " + std::to_string(r.epochs) + " epochs ran out"
                               : "no better value for " + std::to_string(es.patience) + " epochs";
  return "least " + std::string(Name(es.monitor)) + " at epoch " + std::to_string(r.best_epoch) + " of " +
         std::to_string(r.epochs_run) + " searched (" + stop + "), then all " + std::to_string(refit_rows) +
         " rows for " + std::to_string(r.best_epoch) + " epochs";
}

// The refit of every member of `loop` that asks for one and searched without failing: from its
// first weights again, on all its rows, for its best epoch count. nullptr when none does. A
// member whose rows cannot be split again fails permanently (its excluded file went bad).
std::unique_ptr<Refit> RefitChosenLength(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out,
                                         DeviceRuntime& rt, const torch::Tensor& all, const PackLoop& search) {
  auto refit = std::make_unique<Refit>();
  refit->of.assign(in.size(), -1);
  refit->tasks.reserve(in.size());  // the inputs point into it
  for (size_t k = 0; k < in.size(); ++k) {
    const MemberRun& r = search.run(k);
    if (!r.spec->early_stopping.refit || !(*out)[k].status.ok() || r.best_epoch < 1) continue;
    TaskSpec t = *in[k].task;
    t.member.validation_split = 0;
    t.member.early_stopping.enabled = false;
    t.member.epochs = r.best_epoch;
    auto split = MemberRows::Make(t);
    if (!split.ok()) {
      (*out)[k].status = split.status();
      (*out)[k].permanent_failure = true;
      continue;
    }
    refit->tasks.push_back(std::move(t));
    TrainInputs i = in[k];
    i.task = &refit->tasks.back();
    i.split = std::move(*split);
    refit->in.push_back(std::move(i));
    refit->of[k] = static_cast<int>(refit->in.size()) - 1;
  }
  if (refit->in.empty()) return nullptr;
  refit->out.assign(refit->in.size(), TrainOutputs{});
  refit->loop = std::make_unique<PackLoop>(refit->in, &refit->out, rt,
                                           std::vector<std::optional<TrainState>>(refit->in.size()));
  if (refit->loop->status().ok()) refit->loop->Run(all);  // built once already: the same model
  for (size_t k = 0; k < in.size(); ++k) {
    if (refit->of[k] < 0) continue;
    const auto j = static_cast<size_t>(refit->of[k]);
    TrainOutputs& o = refit->out[j];
    if (!refit->loop->status().ok()) o.status = refit->loop->status(), o.permanent_failure = true;
    const MemberRun& r = search.run(k);
    o.metrics = {{"epochs_chosen", r.best_epoch},
                 {"search_epochs", r.epochs_run},
                 {"search_best_val_loss", r.best_value},
                 {"search_val_rows", in[k].split.val_size()},
                 {"refit_rows", refit->in[j].split.train_size()},
                 {"length_rule", LengthRule(r, refit->in[j].split.train_size())}};
    (*out)[k] = std::move(o);
  }
  return refit;
}

// The pack's peaks on the GPU (since TrainPackOnce reset them); nothing on the CPU.
void AddGpuPeaks(DeviceRuntime& rt, TrainOutputs* o) {
  if (!rt.accelerated()) return;
  auto stats = rt.Stats();
  if (!stats.ok()) return;  // Init ran (TrainInputs::runtime): not expected; the peaks are extras
  o->metrics["gpu_allocated_peak_mb"] = static_cast<double>(stats->allocated_peak) / 1048576.0;
  o->metrics["gpu_reserved_peak_mb"] = static_cast<double>(stats->reserved_peak) / 1048576.0;
}

// The fault-injection hooks (fault_injection.h) for libtorch errors, thrown as libtorch would.
void InjectTorchErrors(const std::vector<TrainInputs>& in) {
  TORCH_CHECK_WITH(OutOfMemoryError, !OutOfMemoryRequested(in.size()),
                   "CUDA out of memory. Tried to allocate 2.00 GiB (injected: ENSEMBLED_TEST_OOM_ABOVE)");
  for (const auto& i : in)
    TORCH_CHECK(!TorchErrorRequested(i.task->task_id),
                "mat1 and mat2 shapes cannot be multiplied (injected: ENSEMBLED_TEST_TORCH_ERROR)");
}

void FailAll(const Status& st, bool permanent, std::vector<TrainOutputs>* out, size_t k) {
  out->assign(k, TrainOutputs{});
  for (auto& o : *out) {
    o.status = st;
    o.permanent_failure = permanent;
  }
}

void TrainPackOnce(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out) {
  torch::set_num_threads(in[0].task->threads);
  DeviceRuntime& rt = RuntimeOf(in[0]);
  if (rt.accelerated()) {
    if (Status s = rt.ResetPeakStats(); !s.ok() && in[0].on_note) in[0].on_note(s.message());
  }
  out->assign(in.size(), TrainOutputs{});
  InjectTorchErrors(in);
  std::vector<std::optional<TrainState>> warm(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const std::string& from = in[k].task->warm_from;
    if (from.empty() || !in[k].task->member.warm_start) continue;
    auto state = LoadTrainState(from);
    if (!state.ok())  // a run's own file gone bad: retrying cannot help
      return FailAll(Status::Corruption("member " + in[k].task->member.name + ": warm start: " + state.status().message()),
                     true, out, in.size());
    warm[k] = std::move(*state);
  }
  DeviceDataCache own;  // used when the caller keeps none
  torch::Tensor all = (in[0].data_cache ? in[0].data_cache : &own)->Rows(in[0], rt);
  auto t_start = Clock::now();
  PackLoop loop(in, out, rt, warm);
  if (!loop.status().ok())  // the member's config or files: the same on every retry
    return FailAll(Status::InvalidArgument("member " + in[0].task->member.name + ": " + loop.status().message()),
                   true, out, in.size());
  loop.Run(all);
  const std::unique_ptr<Refit> refit = RefitChosenLength(in, out, rt, all, loop);
  loop.ResultsToHost();
  if (refit && refit->loop->status().ok()) refit->loop->ResultsToHost();
  double train_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  // Compiles a member module once per worker process and forward source: later packs and
  // tasks copy it (the worker trains one pack at a time). Never destroyed: libtorch's own
  // statics may be gone at exit.
  static auto* builder = new MemberModuleBuilder();
  for (size_t k = 0; k < in.size(); ++k) {
    TrainOutputs& o = (*out)[k];
    if (!o.status.ok()) continue;
    const bool refitted = refit && refit->of[k] >= 0;
    FinishMember(refitted ? *refit->loop : loop, refitted ? static_cast<size_t>(refit->of[k]) : k, k, in.size(),
                 train_seconds, builder, rt.device().is_cuda() ? "cuda" : "cpu", &o);
    if (o.status.ok()) AddGpuPeaks(rt, &o);
    if (o.status.ok() && in[k].on_outputs) in[k].on_outputs(o);
  }
}

Status CheckCompatible(const std::vector<TrainInputs>& in) {
  for (const auto& i : in)
    if (i.split.train_size() != in[0].split.train_size() || i.split.val_size() != in[0].split.val_size() ||
        i.features != in[0].features || i.targets != in[0].targets || i.rows != in[0].rows ||
        i.task->rows != in[0].task->rows)
      return Status::InvalidArgument("pack members " + in[0].task->member.name + " and " + i.task->member.name +
                                     " do not share rows and split sizes");
  return Status::Ok();
}


}  // namespace

void ConfigureTorchForDeterminism() {
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  // With deterministic algorithms on, libtorch fills every empty() with NaN by default: extra
  // kernels per layer and step for buffers the worker writes whole before reading.
  at::globalContext().setDeterministicFillUninitializedMemory(false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  torch::set_num_interop_threads(1);
}

namespace {

// Every member of `in` fails with `st`; transient, and device_lost (the worker must end).
void FailAllDeviceLost(const Status& st, std::vector<TrainOutputs>* out, size_t k) {
  FailAll(st, false, out, k);
  for (auto& o : *out) o.device_lost = true;
}

// Out of memory: halves of a pack train one after the other (a member's bits do not depend
// on its pack); a lone member fails transiently: on a GPU other workers share, memory is
// often free again later, and the supervisor's attempts bound the retries.
void SplitAfterOutOfMemory(const std::vector<TrainInputs>& in, const std::string& what,
                           std::vector<TrainOutputs>* out) {
  if (in.size() == 1) {
    return FailAll(Status::Internal("member " + in[0].task->member.name + " does not fit in memory alone: " + what),
                   false, out, 1);
  }
  const size_t half = in.size() / 2;
  if (in[0].on_note)
    in[0].on_note("pack of " + std::to_string(in.size()) + " ran out of memory (" + what.substr(0, 200) +
                  "); training it as packs of " + std::to_string(half) + " and " + std::to_string(in.size() - half));
  std::vector<TrainInputs> a(in.begin(), in.begin() + half), b(in.begin() + half, in.end());
  std::vector<TrainOutputs> oa, ob;
  TrainPack(a, &oa);
  TrainPack(b, &ob);
  out->clear();
  for (auto* part : {&oa, &ob})
    for (auto& o : *part) out->push_back(std::move(o));
}

}  // namespace

void TrainPack(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out) {
  if (Status st = CheckCompatible(in); !st.ok()) return FailAll(st, true, out, in.size());
  DeviceRuntime& rt = RuntimeOf(in[0]);
  try {
    TrainPackOnce(in, out);
    return;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    switch (ClassifyTorchError(e)) {
      case DeviceFault::kContextLost:
        // Nothing more can run in this context, not even freeing its cache.
        return FailAllDeviceLost(Status::Internal("CUDA context lost: " + what), out, in.size());
      case DeviceFault::kOutOfMemory:
        (void)rt.EmptyCache();  // what the failed attempt held, before the halves (or a retry) run
        return SplitAfterOutOfMemory(in, what, out);
      case DeviceFault::kTask:
        // A shape mismatch or a bad value: deterministic for these inputs, so not retried.
        (void)rt.EmptyCache();
        return FailAll(Status::Internal("libtorch: " + what), true, out, in.size());
    }
  }
}

}  // namespace ens
