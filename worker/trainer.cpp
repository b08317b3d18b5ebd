#include "worker/trainer.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/fault_injection.h"
#include "common/seed.h"
#include "worker/mlp.h"

namespace ens {
namespace {

using c10::CachingAllocator::StatType;
using Clock = std::chrono::steady_clock;

torch::Device PickDevice() {
  return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
}

// Mean over the last dimension: a scalar for one member's [B], a [K] vector for a pack's [K, B].
torch::Tensor LossFn(const MemberSpec& s, const torch::Tensor& pred, const torch::Tensor& y) {
  torch::Tensor e = pred - y;
  if (s.loss == "mae") return e.abs().mean(-1);
  if (s.loss == "huber") {
    torch::Tensor a = e.abs();
    float d = static_cast<float>(s.huber_delta);
    return torch::where(a <= d, 0.5 * e * e, d * (a - 0.5f * d)).mean(-1);
  }
  return (e * e).mean(-1);
}

torch::Tensor Penalty(const MemberSpec& s, const Mlp& m) {
  torch::Tensor p = torch::zeros({}, m.weights[0].options().requires_grad(false));
  for (const auto& w : m.weights) {
    if (s.l1 > 0) p = p + static_cast<float>(s.l1) * w.abs().sum();
    if (s.l2 > 0) p = p + static_cast<float>(s.l2) * (w * w).sum();
  }
  return p;
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const MemberSpec& s,
                                                       const std::vector<torch::Tensor>& params) {
  if (s.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay));
  if (s.optimizer == "adamw")
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(s.lr));
}

// Rows `idx` of the segment as a [n, stride] tensor (a copy of just those rows).
torch::Tensor Gather(const torch::Tensor& all, const std::vector<int64_t>& idx, size_t begin, size_t end) {
  torch::Tensor ix = torch::from_blob(const_cast<int64_t*>(idx.data() + begin),
                                      {static_cast<int64_t>(end - begin)}, torch::kLong);
  return all.index_select(0, ix.to(all.device()));
}

struct EvalResult {
  double loss = 0, mae = 0, mse = 0;
};

// Loss in standardised units; mae/mse in original target units.
EvalResult Evaluate(const Mlp& m, const torch::Tensor& all, const std::vector<int64_t>& idx, int features) {
  torch::NoGradGuard ng;
  torch::Tensor rows = Gather(all, idx, 0, idx.size());
  torch::Tensor x = (rows.narrow(1, 0, features) - m.x_mean) / m.x_std;
  torch::Tensor y = rows.select(1, features);
  torch::Tensor pred = m.Forward(x, false);
  torch::Tensor yn = (y - m.y_mean) / m.y_std;
  torch::Tensor err = pred * m.y_std + m.y_mean - y;
  return {LossFn(m.spec, pred, yn).item<double>(), err.abs().mean().item<double>(),
          (err * err).mean().item<double>()};
}

// Mean and std (population, floored) of the training split, accumulated in double in row order.
// Sets the Mlp's normalisation tensors (on its device) and the JSON record of them.
void Standardise(const TrainInputs& in, Mlp* m, nlohmann::json* norm) {
  int f = in.features;
  std::vector<double> sum(f + 1, 0.0), sq(f + 1, 0.0);
  for (int64_t r : in.train_idx) {
    const float* row = in.rows + r * (f + 1);
    for (int c = 0; c <= f; ++c) {
      sum[c] += row[c];
      sq[c] += static_cast<double>(row[c]) * row[c];
    }
  }
  double n = static_cast<double>(in.train_idx.size());
  std::vector<float> mean(f + 1), stdv(f + 1);
  for (int c = 0; c <= f; ++c) {
    mean[c] = static_cast<float>(sum[c] / n);
    double var = std::max(0.0, sq[c] / n - (sum[c] / n) * (sum[c] / n));
    stdv[c] = static_cast<float>(std::max(std::sqrt(var), 1e-6));
  }
  auto dev = m->weights[0].device();
  m->x_mean = torch::tensor(std::vector<float>(mean.begin(), mean.begin() + f)).to(dev);
  m->x_std = torch::tensor(std::vector<float>(stdv.begin(), stdv.begin() + f)).to(dev);
  m->y_mean = torch::tensor(std::vector<float>{mean[f]}).to(dev);
  m->y_std = torch::tensor(std::vector<float>{stdv[f]}).to(dev);
  *norm = {{"x_mean", std::vector<float>(mean.begin(), mean.begin() + f)},
           {"x_std", std::vector<float>(stdv.begin(), stdv.begin() + f)},
           {"y_mean", mean[f]},
           {"y_std", stdv[f]}};
}

std::vector<float> PredictRows(const Mlp& m, const float* rows, uint64_t n, int features) {
  std::vector<float> out(n);
  if (n == 0) return out;
  torch::Tensor all = torch::from_blob(const_cast<float*>(rows), {static_cast<int64_t>(n), features + 1});
  const int64_t kChunk = 8192;
  for (int64_t b = 0; b < static_cast<int64_t>(n); b += kChunk) {
    int64_t len = std::min<int64_t>(kChunk, static_cast<int64_t>(n) - b);
    torch::Tensor p = m.PredictRaw(all.narrow(0, b, len).narrow(1, 0, features)).to(torch::kCPU).contiguous();
    std::memcpy(out.data() + b, p.data_ptr<float>(), len * sizeof(float));
  }
  return out;
}

double Monitored(const std::string& monitor, const EvalResult& v) {
  if (monitor == "val_mae") return v.mae;
  if (monitor == "val_mse") return v.mse;
  return v.loss;
}

}  // namespace

void ConfigureTorchForDeterminism() {
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  torch::set_num_interop_threads(1);
}

std::string TorchDeviceDescription() {
  return torch::cuda::is_available() ? "cuda" : "cpu";
}

void ReleaseTorchCaches() {
  // The CUDA caching allocator is emptied through the public c10 API when CUDA is in use.
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
}

int64_t CudaReservedKb() {
  if (!torch::cuda::is_available()) return 0;
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current / 1024;
}

Status TrainMember(const TrainInputs& in, TrainOutputs* out) {
  const TaskSpec& task = *in.task;
  const MemberSpec& s = task.member;
  torch::set_num_threads(task.threads);
  torch::manual_seed(StreamSeed(task.seed, SeedStream::kDropout));
  torch::Device device = PickDevice();
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(0);
  Mlp m = BuildMlp(s, in.features, StreamSeed(task.seed, SeedStream::kInit), device);
  Standardise(in, &m, &out->norm);

  torch::Tensor all = torch::from_blob(const_cast<float*>(in.rows),
                                       {static_cast<int64_t>(task.rows), in.features + 1});
  if (device.is_cuda()) all = all.to(device);  // one copy of this member's generation on its GPU
  auto opt = MakeOptimizer(s, m.Parameters());
  SeededRng shuffle_rng(StreamSeed(task.seed, SeedStream::kShuffle));
  std::vector<int64_t> order = in.train_idx;
  std::vector<torch::Tensor> best;
  double best_value = INFINITY;
  int best_epoch = -1, since_best = 0, epoch = 0;
  const bool poisoned = NonFiniteLossRequested(task.task_id);  // test hook (fault_injection.h)
  auto t_start = Clock::now();

  for (epoch = 0; epoch < s.epochs; ++epoch) {
    auto t0 = Clock::now();
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle_rng.Below(i)]);
    double loss_sum = 0, abs_sum = 0, sq_sum = 0;
    for (size_t b = 0; b < order.size(); b += s.batch_size) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(s.batch_size));
      torch::Tensor rows = Gather(all, order, b, e);
      torch::Tensor x = (rows.narrow(1, 0, in.features) - m.x_mean) / m.x_std;
      torch::Tensor y = rows.select(1, in.features);
      torch::Tensor yn = (y - m.y_mean) / m.y_std;
      torch::Tensor pred = m.Forward(x, true);
      torch::Tensor loss = LossFn(s, pred, yn);
      if (poisoned) loss = loss * std::nanf("");
      torch::Tensor total = loss + Penalty(s, m);
      opt->zero_grad();
      total.backward();
      opt->step();
      torch::NoGradGuard ng;
      torch::Tensor err = pred.detach() * m.y_std + m.y_mean - y;
      double n = static_cast<double>(e - b);
      loss_sum += loss.item<double>() * n;
      abs_sum += err.abs().sum().item<double>();
      sq_sum += (err * err).sum().item<double>();
      if (in.on_progress) in.on_progress(epoch + 1);
    }
    double n = static_cast<double>(order.size());
    EvalResult val = Evaluate(m, all, in.val_idx, in.features);
    if (!std::isfinite(loss_sum) || !std::isfinite(val.loss)) {
      out->permanent_failure = true;
      return Status::InvalidArgument("member " + s.name + ": loss became non-finite at epoch " +
                                     std::to_string(epoch + 1));
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    out->history.push_back({{"epoch", epoch + 1}, {"loss", loss_sum / n}, {"val_loss", val.loss},
                            {"mae", abs_sum / n}, {"mse", sq_sum / n}, {"val_mae", val.mae},
                            {"val_mse", val.mse}, {"lr", s.lr}, {"seconds", secs}});
    if (in.on_progress) in.on_progress(epoch + 1);
    double v = Monitored(s.early_stopping.monitor, val);
    if (v < best_value - s.early_stopping.min_delta) {
      best_value = v;
      best_epoch = epoch + 1;
      since_best = 0;
      if (s.early_stopping.enabled && s.early_stopping.restore_best) {
        best.clear();
        for (const auto& p : m.Parameters()) best.push_back(p.detach().clone());
      }
    } else if (s.early_stopping.enabled && ++since_best > s.early_stopping.patience) {
      ++epoch;
      break;
    }
  }
  if (!best.empty()) {
    torch::NoGradGuard ng;
    auto params = m.Parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(best[i]);
  }
  if (!in.checkpoint_path.empty()) {
    Status st = SaveCheckpoint(m, in.checkpoint_path);
    if (!st.ok()) return st;
  }
  out->holdout_pred = PredictRows(m, in.holdout, in.holdout_rows, in.features);
  out->pool_pred = PredictRows(m, in.pool, in.pool_rows, in.features);
  double se = 0, ae = 0;
  for (uint64_t r = 0; r < in.holdout_rows; ++r) {
    double d = out->holdout_pred[r] - in.holdout[r * (in.features + 1) + in.features];
    se += d * d;
    ae += std::abs(d);
  }
  double hn = std::max<double>(1.0, static_cast<double>(in.holdout_rows));
  out->metrics = {{"epochs_run", epoch},
                  {"best_epoch", best_epoch},
                  {"best_val_loss", best_value},
                  {"holdout_rmse", std::sqrt(se / hn)},
                  {"holdout_mae", ae / hn},
                  {"train_seconds", std::chrono::duration<double>(Clock::now() - t_start).count()},
                  {"device", TorchDeviceDescription()}};
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    out->metrics["gpu_allocated_peak_mb"] = stats.allocated_bytes[agg].peak / 1048576.0;
    out->metrics["gpu_reserved_peak_mb"] = stats.reserved_bytes[agg].peak / 1048576.0;
  }
  return Status::Ok();
}


// ---- fused member packs ------------------------------------------------------------------
//
// K pack-compatible members train as one batched model: weights [K, out, in], each member's
// own rows per step (its own split and shuffle stream), losses summed so each member's
// gradient is its own; Adam/AdamW/SGD are elementwise, so members never mix. A member that
// early-stops keeps the parameters it stopped with (or its best) while the others go on.
namespace {

struct PackMember {
  Mlp model;               // init, norm; later its final parameters
  SeededRng shuffle{0};
  std::vector<int64_t> order;
  double best_value = INFINITY;
  int best_epoch = -1, since_best = 0, epochs_run = 0;
  bool stopped = false;
  std::vector<torch::Tensor> kept;  // parameters to keep (best, or at stop)
};

// Stacks member k's tensors into [K, ...] parameters.
std::vector<torch::Tensor> StackParameters(const std::vector<PackMember>& pm, torch::Device dev) {
  std::vector<torch::Tensor> out;
  size_t layers = pm[0].model.weights.size();
  for (size_t l = 0; l < layers; ++l) {
    std::vector<torch::Tensor> w, b;
    for (const auto& m : pm) {
      w.push_back(m.model.weights[l].detach());
      b.push_back(m.model.biases[l].detach());
    }
    out.push_back(torch::stack(w).to(dev).requires_grad_(true));
    out.push_back(torch::stack(b).to(dev).requires_grad_(true));
  }
  return out;
}

torch::Tensor PackForward(const MemberSpec& s, const std::vector<torch::Tensor>& p, torch::Tensor h, bool training) {
  size_t layers = p.size() / 2;
  for (size_t l = 0; l < layers; ++l) {
    h = torch::baddbmm(p[2 * l + 1].unsqueeze(1), h, p[2 * l].transpose(1, 2));
    if (l + 1 < layers) {
      const std::string& act = s.layers[l].activation;
      if (act == "relu") h = torch::relu(h);
      else if (act == "tanh") h = torch::tanh(h);
      else if (act == "sigmoid") h = torch::sigmoid(h);
      else if (act == "swish") h = h * torch::sigmoid(h);
      else if (act == "gelu") h = torch::gelu(h);
      if (training && s.layers[l].dropout > 0) h = torch::dropout(h, s.layers[l].dropout, true);
    }
  }
  return h.squeeze(-1);
}

// Rows of every member for one step: [K, n, stride].
torch::Tensor GatherPack(const torch::Tensor& all, const std::vector<const std::vector<int64_t>*>& idx, size_t b,
                         size_t e) {
  std::vector<int64_t> flat;
  flat.reserve(idx.size() * (e - b));
  for (const auto* v : idx) flat.insert(flat.end(), v->begin() + b, v->begin() + e);
  torch::Tensor ix = torch::from_blob(flat.data(), {static_cast<int64_t>(flat.size())}, torch::kLong).to(all.device());
  return all.index_select(0, ix).view({static_cast<int64_t>(idx.size()), static_cast<int64_t>(e - b), -1});
}

}  // namespace

Status TrainPack(const std::vector<TrainInputs>& in, std::vector<TrainOutputs>* out) {
  const size_t K = in.size();
  const MemberSpec& s = in[0].task->member;
  const int F = in[0].features;
  torch::set_num_threads(in[0].task->threads);
  torch::manual_seed(StreamSeed(in[0].task->seed, SeedStream::kDropout));
  torch::Device dev = PickDevice();
  out->assign(K, TrainOutputs{});
  std::vector<PackMember> pm(K);
  for (size_t k = 0; k < K; ++k) {
    const TaskSpec& t = *in[k].task;
    if (in[k].train_idx.size() != in[0].train_idx.size() || in[k].val_idx.size() != in[0].val_idx.size())
      return Status::InvalidArgument("pack members have different split sizes");
    pm[k].model = BuildMlp(t.member, F, StreamSeed(t.seed, SeedStream::kInit), torch::kCPU);
    Standardise(in[k], &pm[k].model, &(*out)[k].norm);
    pm[k].shuffle = SeededRng(StreamSeed(t.seed, SeedStream::kShuffle));
    pm[k].order = in[k].train_idx;
  }
  std::vector<torch::Tensor> params = StackParameters(pm, dev);
  auto stack_norm = [&](auto get) {
    std::vector<torch::Tensor> v;
    for (auto& m : pm) v.push_back(get(m.model));
    return torch::stack(v).to(dev).unsqueeze(1);  // [K, 1, ...]
  };
  torch::Tensor xm = stack_norm([](Mlp& m) { return m.x_mean; }), xs = stack_norm([](Mlp& m) { return m.x_std; });
  torch::Tensor ym = stack_norm([](Mlp& m) { return m.y_mean; }).squeeze(-1);
  torch::Tensor ys = stack_norm([](Mlp& m) { return m.y_std; }).squeeze(-1);  // [K, 1]
  torch::Tensor all = torch::from_blob(const_cast<float*>(in[0].rows),
                                       {static_cast<int64_t>(in[0].task->rows), F + 1});
  if (dev.is_cuda()) all = all.to(dev);
  auto opt = MakeOptimizer(s, params);
  std::vector<const std::vector<int64_t>*> orders, vals;
  for (size_t k = 0; k < K; ++k) {
    orders.push_back(&pm[k].order);
    vals.push_back(&in[k].val_idx);
  }
  const size_t n = pm[0].order.size();
  const auto es = s.early_stopping;
  torch::Tensor poison;  // test hook (fault_injection.h): NaN in the listed members' slots
  std::vector<float> poison_v(K, 1.0f);
  for (size_t k = 0; k < K; ++k)
    if (NonFiniteLossRequested(in[k].task->task_id)) poison_v[k] = std::nanf("");
  if (std::any_of(poison_v.begin(), poison_v.end(), [](float v) { return std::isnan(v); }))
    poison = torch::tensor(poison_v).to(dev);
  auto t_start = Clock::now();
  for (int epoch = 0; epoch < s.epochs; ++epoch) {
    auto t0 = Clock::now();
    for (auto& m : pm)
      for (size_t i = m.order.size(); i > 1; --i) std::swap(m.order[i - 1], m.order[m.shuffle.Below(i)]);
    // Accumulated on the device, read once per epoch (a host sync per step costs more than the step).
    torch::Tensor loss_sum = torch::zeros({static_cast<int64_t>(K)}, torch::TensorOptions().device(dev));
    torch::Tensor abs_sum = loss_sum.clone(), sq_sum = loss_sum.clone();
    for (size_t b = 0; b < n; b += s.batch_size) {
      size_t e = std::min(n, b + static_cast<size_t>(s.batch_size));
      torch::Tensor rows = GatherPack(all, orders, b, e);
      torch::Tensor x = (rows.narrow(2, 0, F) - xm) / xs;
      torch::Tensor y = rows.select(2, F);
      torch::Tensor pred = PackForward(s, params, x, true);
      torch::Tensor loss = LossFn(s, pred, (y - ym) / ys);  // [K]
      if (poison.defined()) loss = loss * poison;
      torch::Tensor total = loss.sum();
      for (size_t l = 0; l < params.size(); l += 2) {
        if (s.l1 > 0) total = total + static_cast<float>(s.l1) * params[l].abs().sum();
        if (s.l2 > 0) total = total + static_cast<float>(s.l2) * (params[l] * params[l]).sum();
      }
      opt->zero_grad();
      total.backward();
      opt->step();
      torch::NoGradGuard ng;
      torch::Tensor err = pred.detach() * ys + ym - y;
      loss_sum.add_(loss.detach(), static_cast<double>(e - b));
      abs_sum.add_(err.abs().sum(1));
      sq_sum.add_((err * err).sum(1));
      if (in[0].on_progress) in[0].on_progress(epoch + 1);
    }
    torch::NoGradGuard ng;
    loss_sum = loss_sum.to(torch::kCPU, torch::kDouble);
    abs_sum = abs_sum.to(torch::kCPU, torch::kDouble);
    sq_sum = sq_sum.to(torch::kCPU, torch::kDouble);
    torch::Tensor vrows = GatherPack(all, vals, 0, vals[0]->size());
    torch::Tensor vpred = PackForward(s, params, (vrows.narrow(2, 0, F) - xm) / xs, false);
    torch::Tensor vy = vrows.select(2, F);
    torch::Tensor vloss = LossFn(s, vpred, (vy - ym) / ys).to(torch::kCPU, torch::kDouble);
    torch::Tensor verr = vpred * ys + ym - vy;
    torch::Tensor vmae = verr.abs().mean(1).to(torch::kCPU, torch::kDouble);
    torch::Tensor vmse = (verr * verr).mean(1).to(torch::kCPU, torch::kDouble);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    bool all_stopped = true;
    for (size_t k = 0; k < K; ++k) {
      PackMember& m = pm[k];
      if (m.stopped) continue;
      double l = loss_sum[k].item<double>() / n, vl = vloss[k].item<double>();
      if (!std::isfinite(l) || !std::isfinite(vl)) {
        // Only this member's slice is non-finite (the optimizers are elementwise and each
        // loss's gradient is its own), so the others train on unchanged.
        (*out)[k].permanent_failure = true;
        (*out)[k].status = Status::InvalidArgument("member " + in[k].task->member.name +
                                                   ": loss became non-finite at epoch " + std::to_string(epoch + 1) +
                                                   " (pack of " + std::to_string(K) + ")");
        m.stopped = true;
        continue;
      }
      (*out)[k].history.push_back({{"epoch", epoch + 1}, {"loss", l}, {"val_loss", vl},
                                   {"mae", abs_sum[k].item<double>() / n}, {"mse", sq_sum[k].item<double>() / n},
                                   {"val_mae", vmae[k].item<double>()}, {"val_mse", vmse[k].item<double>()},
                                   {"lr", s.lr}, {"seconds", secs}});
      m.epochs_run = epoch + 1;
      EvalResult v{vl, vmae[k].item<double>(), vmse[k].item<double>()};
      double value = Monitored(es.monitor, v);
      auto snapshot = [&] {
        m.kept.clear();
        for (const auto& p : params) m.kept.push_back(p[static_cast<int64_t>(k)].detach().clone());
      };
      if (value < m.best_value - es.min_delta) {
        m.best_value = value;
        m.best_epoch = epoch + 1;
        m.since_best = 0;
        if (es.enabled && es.restore_best) snapshot();
      } else if (es.enabled && ++m.since_best > es.patience) {
        m.stopped = true;  // frozen from here: later updates of its slice are discarded
        if (!es.restore_best) snapshot();
      }
      all_stopped = all_stopped && m.stopped;
    }
    if (all_stopped) break;
  }
  double train_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  for (size_t k = 0; k < K; ++k) {
    PackMember& m = pm[k];
    if (!(*out)[k].status.ok()) continue;
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> final_params = m.kept;
    if (final_params.empty())
      for (const auto& p : params) final_params.push_back(p[static_cast<int64_t>(k)].detach().clone());
    for (size_t l = 0; l < m.model.weights.size(); ++l) {
      m.model.weights[l] = final_params[2 * l].to(dev);
      m.model.biases[l] = final_params[2 * l + 1].to(dev);
    }
    m.model.x_mean = m.model.x_mean.to(dev);
    m.model.x_std = m.model.x_std.to(dev);
    m.model.y_mean = m.model.y_mean.to(dev);
    m.model.y_std = m.model.y_std.to(dev);
    const TrainInputs& mi = in[k];
    TrainOutputs& o = (*out)[k];
    if (!mi.checkpoint_path.empty()) {
      Status st = SaveCheckpoint(m.model, mi.checkpoint_path);
      if (!st.ok()) {  // this member's write (e.g. a full disk): transient, and its own
        o.status = st;
        continue;
      }
    }
    o.holdout_pred = PredictRows(m.model, mi.holdout, mi.holdout_rows, F);
    o.pool_pred = PredictRows(m.model, mi.pool, mi.pool_rows, F);
    double se = 0, ae = 0;
    for (uint64_t r = 0; r < mi.holdout_rows; ++r) {
      double d = o.holdout_pred[r] - mi.holdout[r * (F + 1) + F];
      se += d * d;
      ae += std::abs(d);
    }
    double hn = std::max<double>(1.0, static_cast<double>(mi.holdout_rows));
    o.metrics = {{"epochs_run", m.epochs_run}, {"best_epoch", m.best_epoch}, {"best_val_loss", m.best_value},
                 {"holdout_rmse", std::sqrt(se / hn)}, {"holdout_mae", ae / hn},
                 {"device", TorchDeviceDescription()}, {"pack_size", K}, {"pack_position", k},
                 {"train_seconds", train_seconds / static_cast<double>(K)}, {"pack_train_seconds", train_seconds}};
  }
  return Status::Ok();
}

}  // namespace ens
