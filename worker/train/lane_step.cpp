#include "worker/train/lane_step.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>

#include "common/config/lane_fit.h"
#include "worker/device/cpu_only.h"

namespace ens {
namespace {

constexpr double kBeta1 = 0.9, kBeta2 = 0.999;  // PackOptimizer's

// A block's lane j holds member k = block * 16 + j, or (past the pack's end) a copy of the
// block's first member.
int64_t MemberOf(int64_t block, int j, int64_t members) {
  const int64_t k = block * kLaneWidth + j;
  return k < members ? k : block * kLaneWidth;
}

// 64-byte aligned scratch for the kernel.
struct Scratch {
  explicit Scratch(int64_t floats)
      : data(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((floats * 4 + 63) / 64 * 64)))) {}
  ~Scratch() { std::free(data); }
  float* data;
};

}  // namespace

bool LaneStepFits(const std::vector<const MemberSpec*>& specs, int classes, int targets, int features) {
  for (const MemberSpec* s : specs)
    if (!LaneFits(*s, classes, targets, features)) return false;
  return true;
}

torch::Tensor LaneStep::Host(const torch::Tensor& t) const {
  if (!t.defined()) return t;
  if (launcher_ != nullptr) return rt_->ToHost(t).contiguous();
  RequireCpu("the lane kernel", {t});
  return t.contiguous();
}

LaneStep::LaneStep(Model& model, const std::vector<const MemberSpec*>& specs, const PackStepNorm& norm,
                   const std::vector<int64_t>& step_offsets, LaneLauncher* launcher, DeviceRuntime* rt)
    : isa_(ChosenLaneIsa()), offsets_(step_offsets), launcher_(launcher), rt_(rt) {
  TORCH_CHECK(launcher_ == nullptr || rt_ != nullptr, "a lane launcher needs the device runtime");
  std::optional<MlpLayers> ml = model.Layers();
  TORCH_CHECK(ml.has_value(), "LaneStep needs a model that gives its layers");
  weights_ = ml->weights;
  biases_ = ml->biases;
  dropout_ = ml->dropout;
  if (launcher_ == nullptr) {
    RequireCpu("the lane kernel", weights_);
    RequireCpu("the lane kernel", biases_);
  }
  for (size_t l = 0; l < weights_.size(); ++l)
    TORCH_CHECK(weights_[l].is_contiguous() && biases_[l].is_contiguous(), "LaneStep writes the model's parameters in place");
  members_ = weights_[0].size(0);
  blocks_ = (members_ + kLaneWidth - 1) / kLaneWidth;
  const int64_t F = weights_[0].size(2);
  net_.inputs = F;
  net_.layers = static_cast<int64_t>(weights_.size());
  for (int64_t l = 0; l < net_.layers; ++l) {
    net_.units[l] = weights_[l].size(1);
    if (l + 1 < net_.layers) net_.activations[l] = ml->activations[l], hidden_ += net_.units[l];
  }
  net_.loss = specs[0]->loss;
  net_.optimizer = specs[0]->optimizer;
  net_.adversarial = specs[0]->adversarial_eps > 0;  // the whole pack's (pack_plan.cpp never mixes)
  TORCH_CHECK(net_.units[net_.layers - 1] == TraitsOf(net_.loss).outputs,
              "LaneStep trains one target (and its variance for a loss of two outputs, gaussian_nll)");
  params_ = net_.Params();
  if (offsets_.empty()) offsets_.assign(static_cast<size_t>(members_), 0);
  for (int64_t k = 0; k < members_; ++k) {
    beta1_pow_.push_back(std::pow(kBeta1, static_cast<double>(offsets_[k])));
    beta2_pow_.push_back(std::pow(kBeta2, static_cast<double>(offsets_[k])));
  }
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  params_t_ = torch::empty({blocks_, params_, kLaneWidth}, f32);
  m_ = torch::zeros({blocks_, params_, kLaneWidth}, f32);
  v_ = net_.optimizer == OptimizerKind::kSgd ? torch::Tensor() : torch::zeros({blocks_, params_, kLaneWidth}, f32);
  hyper_ = torch::empty({blocks_, kLaneHyperRows + 3 * F, kLaneWidth}, f32);
  sums_ = torch::zeros({blocks_, 3, kLaneWidth}, torch::kDouble);
  val_sums_ = torch::zeros({blocks_, 3, kLaneWidth}, torch::kDouble);
  for (const MemberSpec* s : specs)
    for (const LayerSpec& l : s->layers) dropout_any_ = dropout_any_ || l.dropout > 0;
  FillHyper(specs, norm);
  LoadParams();
}

// Hyperparameters as PackOptimizer and the objective hold them: floats of the spec's doubles.
void LaneStep::FillHyper(const std::vector<const MemberSpec*>& specs, const PackStepNorm& norm) {
  const int64_t F = net_.inputs;
  const torch::Tensor xm = Host(norm.xm), xs = Host(norm.xs), ym = Host(norm.ym), ys = Host(norm.ys);
  const torch::Tensor adv = net_.adversarial ? Host(norm.adversarial_step) : torch::Tensor();
  TORCH_CHECK(!net_.adversarial || adv.numel() == members_ * F, "an adversarial pack needs its steps [K, 1, F]");
  for (int64_t b = 0; b < blocks_; ++b) {
    float* h = Lanes(hyper_, b);
    for (int j = 0; j < kLaneWidth; ++j) {
      const int64_t k = MemberOf(b, j, members_);
      const MemberSpec& s = *specs[static_cast<size_t>(k)];
      const float lr = static_cast<float>(s.lr), wd = static_cast<float>(s.weight_decay);
      const float l1 = static_cast<float>(s.l1), l2 = static_cast<float>(s.l2);
      auto at = [&](int64_t row) -> float& { return h[row * kLaneWidth + j]; };
      at(kLaneLr) = lr;
      at(kLaneDecay) = s.optimizer == OptimizerKind::kAdamW ? 1.0f - lr * wd : 1.0f;
      at(kLaneWeightDecay) = wd;
      at(kLaneMomentum) = static_cast<float>(s.momentum);
      at(kLaneL1) = l1;
      at(kLaneL2x2) = 2.0f * l2;
      at(kLanePenalty) = l1 != 0.0f || l2 != 0.0f ? 1.0f : 0.0f;
      at(kLaneDelta) = static_cast<float>(s.huber_delta);
      at(kLanePoison) = 1.0f;
      at(kLaneYMean) = ym.data_ptr<float>()[k];
      at(kLaneYStd) = ys.data_ptr<float>()[k];
      for (int64_t c = 0; c < F; ++c) {
        at(kLaneHyperRows + c) = xm.data_ptr<float>()[k * F + c];
        at(kLaneHyperRows + F + c) = xs.data_ptr<float>()[k * F + c];
        at(kLaneHyperRows + 2 * F + c) = adv.defined() ? adv.data_ptr<float>()[k * F + c] : 0.0f;
      }
    }
  }
}

// The model's parameters into lanes.
void LaneStep::LoadParams() {
  std::vector<torch::Tensor> host_w, host_b;
  for (int64_t l = 0; l < net_.layers; ++l) host_w.push_back(Host(weights_[l])), host_b.push_back(Host(biases_[l]));
  for (int64_t b = 0; b < blocks_; ++b) {
    float* p = Lanes(params_t_, b);
    for (int j = 0; j < kLaneWidth; ++j) {
      const int64_t k = MemberOf(b, j, members_);
      int64_t at = 0;
      for (int64_t l = 0; l < net_.layers; ++l) {
        const torch::Tensor& w = host_w[l];
        const torch::Tensor& bias = host_b[l];
        const int64_t n = w.size(1) * w.size(2), o = w.size(1);
        for (int64_t e = 0; e < n; ++e) p[(at + e) * kLaneWidth + j] = w.data_ptr<float>()[k * n + e];
        at += n;
        for (int64_t e = 0; e < o; ++e) p[(at + e) * kLaneWidth + j] = bias.data_ptr<float>()[k * o + e];
        at += o;
      }
    }
  }
}

void LaneStep::SetPoison(const torch::Tensor& poison) {
  OwnOnHost();
  const torch::Tensor p = Host(poison);
  for (int64_t b = 0; b < blocks_; ++b)
    for (int j = 0; j < kLaneWidth; ++j)
      Lanes(hyper_, b)[kLanePoison * kLaneWidth + j] = p.defined() ? p.data_ptr<float>()[MemberOf(b, j, members_)] : 1.0f;
}

// Member k's slices of a lane tensor, shaped as the model's parameters (a bias [1, O]).
PackOptimizer::Moments LaneStep::MemberMoments(int64_t k) {
  OwnOnHost();  // from a launcher's device once, not once a member
  auto member = [&](const torch::Tensor& lanes) {
    std::vector<torch::Tensor> out;
    const float* src = lanes.data_ptr<float>() + (k / kLaneWidth) * lanes.stride(0) + k % kLaneWidth;
    int64_t at = 0;
    for (int64_t l = 0; l < net_.layers; ++l) {
      const int64_t o = weights_[l].size(1), i = weights_[l].size(2);
      torch::Tensor w = torch::empty({o, i}), bias = torch::empty({1, o});
      for (int64_t e = 0; e < o * i; ++e) w.data_ptr<float>()[e] = src[(at + e) * kLaneWidth];
      at += o * i;
      for (int64_t e = 0; e < o; ++e) bias.data_ptr<float>()[e] = src[(at + e) * kLaneWidth];
      at += o;
      out.push_back(w);
      out.push_back(bias);
    }
    return out;
  };
  PackOptimizer::Moments s;
  s.m = member(m_);
  if (v_.defined()) s.v = member(v_);
  return s;
}

void LaneStep::SetMemberMoments(int64_t k, const PackOptimizer::Moments& s) {
  OwnOnHost();
  auto set = [&](torch::Tensor& lanes, const std::vector<torch::Tensor>& from) {
    const int64_t b = k / kLaneWidth;
    for (int j = 0; j < kLaneWidth; ++j) {
      if (MemberOf(b, j, members_) != k) continue;
      float* dst = Lanes(lanes, b) + j;
      int64_t at = 0;
      for (const torch::Tensor& t : from) {
        const torch::Tensor c = Host(t).to(torch::kFloat32).contiguous();
        for (int64_t e = 0; e < c.numel(); ++e) dst[(at + e) * kLaneWidth] = c.data_ptr<float>()[e];
        at += c.numel();
      }
    }
  };
  set(m_, s.m);
  if (v_.defined()) set(v_, s.v);
}

// The model's masks where the model draws them: with a launcher they are laid into lanes on the
// device by tensor operations (each lane's member picked by one index_select), so no mask
// crosses to the host; on the CPU by hand.
void LaneStep::DrawMasks(int64_t len, int64_t batch) {
  const bool device = launcher_ != nullptr;
  // Adversarial training: each step's forward draws its masks, then its adversarial forward
  // draws its own (the autograd loop's two Forward calls, in that order).
  const int64_t draws = net_.adversarial ? 2 : 1, row = draws * hidden_;
  masks_ = torch::ones({blocks_, len, row, kLaneWidth}, torch::TensorOptions().device(device ? rt_->device() : torch::kCPU));
  if (device && !lane_members_.defined()) {
    torch::Tensor k = torch::empty({blocks_ * kLaneWidth}, torch::kLong);
    for (int64_t t = 0; t < blocks_ * kLaneWidth; ++t) k.data_ptr<int64_t>()[t] = MemberOf(t / kLaneWidth, t % kLaneWidth, members_);
    lane_members_ = rt_->ToDevice(k);
  }
  for (int64_t first = 0; first < len; first += batch) {
    const int64_t rows = std::min(batch, len - first);
    for (int64_t d = 0, at = 0; d < draws; ++d) {
      for (int64_t l = 0; l + 1 < net_.layers; ++l) {
        const int64_t units = net_.units[l];
        const torch::Tensor m = dropout_(rows, units, static_cast<size_t>(l));  // [K, rows, units] or undefined
        if (m.defined() && device) {
          masks_.narrow(1, first, rows).narrow(2, at, units).copy_(
              m.index_select(0, lane_members_).view({blocks_, kLaneWidth, rows, units}).permute({0, 2, 3, 1}));
        } else if (m.defined()) {
          const torch::Tensor c = Host(m);
          for (int64_t b = 0; b < blocks_; ++b)
            for (int j = 0; j < kLaneWidth; ++j) {
              const float* src = c.data_ptr<float>() + MemberOf(b, j, members_) * rows * units;
              float* dst = Lanes(masks_, b) + j;
              for (int64_t r = 0; r < rows; ++r)
                for (int64_t u = 0; u < units; ++u) dst[((first + r) * row + at + u) * kLaneWidth] = src[r * units + u];
            }
        }
        at += units;
      }
    }
  }
}

void LaneStep::Window(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch,
                      const std::vector<bool>& running) {
  RunWindow(all, ix, batch, running, true);
}

void LaneStep::Validate(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch,
                        const std::vector<bool>& running) {
  RunWindow(all, ix, batch, running, false);
}

void LaneStep::RunWindow(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch,
                         const std::vector<bool>& running, bool train) {
  TORCH_CHECK(all.is_contiguous() && all.scalar_type() == torch::kFloat32, "the row table must be contiguous float32");
  if (launcher_ == nullptr) RequireCpu("the lane kernel", {all});
  const torch::Tensor rows = Host(ix);
  const int64_t len = rows.size(1), stride = all.size(1), steps = (len + batch - 1) / batch;
  if (!offsets_t_.defined() || offsets_t_.size(1) < len) offsets_t_ = torch::empty({blocks_, len, kLaneWidth}, torch::kLong);
  const int64_t* r = rows.data_ptr<int64_t>();
  // Position by position, a lane each: every write fills the cache line being written (lane by
  // lane, a window's block spans more than the L1 cache and each pass came back for its lines).
  for (int64_t b = 0; b < blocks_; ++b) {
    int64_t* o = offsets_t_.data_ptr<int64_t>() + b * offsets_t_.stride(0);
    const int64_t* from[kLaneWidth];
    for (int j = 0; j < kLaneWidth; ++j) from[j] = r + MemberOf(b, j, members_) * len;
    for (int64_t i = 0; i < len; ++i)
      for (int j = 0; j < kLaneWidth; ++j) o[i * kLaneWidth + j] = from[j][i] * stride;
  }
  // Adam's bias corrections of each step and member, as PackOptimizer::StepOnCpu makes them.
  if (train) corrections_ = torch::empty({blocks_, steps, 2, kLaneWidth});
  for (int64_t s = 0; train && s < steps; ++s) {
    for (int64_t k = 0; k < members_; ++k) {
      beta1_pow_[k] *= kBeta1;
      beta2_pow_[k] *= kBeta2;
    }
    for (int64_t b = 0; b < blocks_; ++b)
      for (int j = 0; j < kLaneWidth; ++j) {
        const int64_t k = MemberOf(b, j, members_);
        float* c = corrections_.data_ptr<float>() + ((b * steps + s) * 2) * kLaneWidth + j;
        c[0] = static_cast<float>(1.0 - beta1_pow_[k]);
        c[kLaneWidth] = static_cast<float>(std::sqrt(1.0 - beta2_pow_[k]));
      }
  }
  const bool masked = train && dropout_any_;
  if (masked) DrawMasks(len, batch);
  if (launcher_ != nullptr) {
    LaunchWindow(all, len, batch, steps, running, train, masked);
    if (train) steps_ += steps;
    return;
  }
  torch::Tensor& sums = train ? sums_ : val_sums_;
  const int64_t scratch_floats = net_.ScratchFloats();
  at::parallel_for(0, blocks_, 1, [&](int64_t begin, int64_t end) {
    Scratch scratch(scratch_floats);
    for (int64_t b = begin; b < end; ++b) {
      bool any = false;
      for (int64_t k = b * kLaneWidth; k < std::min(members_, (b + 1) * kLaneWidth); ++k) any = any || running[k];
      if (!any) continue;
      LaneBlock block{Lanes(params_t_, b), Lanes(m_, b), v_.defined() ? Lanes(v_, b) : nullptr, Lanes(hyper_, b),
                      sums.data_ptr<double>() + b * sums.stride(0)};
      LaneWindow w;
      w.table = all.data_ptr<float>();
      w.offsets = offsets_t_.data_ptr<int64_t>() + b * offsets_t_.stride(0);
      w.len = len;
      w.batch = batch;
      w.corrections = train ? corrections_.data_ptr<float>() + b * steps * 2 * kLaneWidth : nullptr;
      w.masks = masked ? masks_.data_ptr<float>() + b * masks_.stride(0) : nullptr;
      w.train = train;
      LaneTrainWindow(isa_, net_, block, w, scratch.data);
    }
  });
  if (train) steps_ += steps;
}

// Each member's lanes of `from` added to loss_sum [K] and sums[0..1] [K]; `from` zeroed. With a
// launcher, `from` is read back from the device and the totals go there in one add each.
void LaneStep::MoveSums(torch::Tensor& from, torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums) {
  torch::Tensor device_from = from.is_same(sums_) ? d_sums_ : d_val_sums_;
  const bool device = launcher_ != nullptr && on_device_;
  const torch::Tensor lanes = device ? rt_->ToHost(device_from) : from;
  std::vector<torch::Tensor> targets = {loss_sum, sums[0], sums[1]};
  if (launcher_ != nullptr)
    for (torch::Tensor& t : targets) t = torch::zeros({members_}, torch::kDouble);
  RequireCpu("the lane kernel", targets);
  double* out[3] = {targets[0].data_ptr<double>(), targets[1].data_ptr<double>(), targets[2].data_ptr<double>()};
  const double* s = lanes.data_ptr<double>();
  for (int64_t k = 0; k < members_; ++k)
    for (int i = 0; i < 3; ++i) out[i][k] += s[(k / kLaneWidth) * 3 * kLaneWidth + i * kLaneWidth + k % kLaneWidth];
  if (launcher_ != nullptr) {
    loss_sum.add_(rt_->ToDevice(targets[0]));
    sums[0].add_(rt_->ToDevice(targets[1]));
    sums[1].add_(rt_->ToDevice(targets[2]));
  }
  from.zero_();
  if (device) device_from.zero_();
}

void LaneStep::EndValidation(torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums) {
  MoveSums(val_sums_, loss_sum, sums);
}

void LaneStep::EndEpoch(torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums) {
  torch::NoGradGuard no_grad;
  MoveSums(sums_, loss_sum, sums);
  // The parameters back into the model's tensors, member by member (from a launcher's device:
  // one read of the lanes, then one copy a tensor).
  const torch::Tensor lanes = launcher_ != nullptr && on_device_ ? rt_->ToHost(d_params_) : params_t_;
  std::vector<torch::Tensor> into_w, into_b;
  for (int64_t l = 0; l < net_.layers; ++l) {
    into_w.push_back(launcher_ != nullptr ? torch::empty(weights_[l].sizes()) : weights_[l]);
    into_b.push_back(launcher_ != nullptr ? torch::empty(biases_[l].sizes()) : biases_[l]);
  }
  for (int64_t k = 0; k < members_; ++k) {
    const float* p = lanes.data_ptr<float>() + (k / kLaneWidth) * lanes.stride(0) + k % kLaneWidth;
    int64_t at = 0;
    for (int64_t l = 0; l < net_.layers; ++l) {
      const int64_t n = weights_[l].size(1) * weights_[l].size(2), o = weights_[l].size(1);
      float* w = into_w[l].data_ptr<float>() + k * n;
      float* bias = into_b[l].data_ptr<float>() + k * o;
      for (int64_t e = 0; e < n; ++e) w[e] = p[(at + e) * kLaneWidth];
      at += n;
      for (int64_t e = 0; e < o; ++e) bias[e] = p[(at + e) * kLaneWidth];
      at += o;
    }
  }
  if (launcher_ != nullptr)
    for (int64_t l = 0; l < net_.layers; ++l) {
      weights_[l].copy_(rt_->ToDevice(into_w[l]));
      biases_[l].copy_(rt_->ToDevice(into_b[l]));
    }
}

void LaneStep::OwnOnHost() {
  if (!on_device_) return;
  params_t_.copy_(rt_->ToHost(d_params_));
  m_.copy_(rt_->ToHost(d_m_));
  if (v_.defined()) v_.copy_(rt_->ToHost(d_v_));
  sums_.copy_(rt_->ToHost(d_sums_));
  val_sums_.copy_(rt_->ToHost(d_val_sums_));
  on_device_ = false;
}

void LaneStep::OwnOnDevice() {
  if (on_device_) return;
  d_params_ = rt_->ToDevice(params_t_);
  d_m_ = rt_->ToDevice(m_);
  d_v_ = v_.defined() ? rt_->ToDevice(v_) : torch::Tensor();
  d_hyper_ = rt_->ToDevice(hyper_);
  d_sums_ = rt_->ToDevice(sums_);
  d_val_sums_ = rt_->ToDevice(val_sums_);
  on_device_ = true;
}

// One launch over every block: the window's host-made arrays copied over first (ordered before
// the launch on the device's stream), each thread a member (lane_launcher.h).
void LaneStep::LaunchWindow(const torch::Tensor& all, int64_t len, int64_t batch, int64_t steps,
                            const std::vector<bool>& running, bool train, bool masked) {
  OwnOnDevice();
  TORCH_CHECK(all.device() == rt_->device(), "the row table must be on the lanes' device");
  torch::Tensor blocks_running = torch::zeros({blocks_}, torch::kUInt8);
  for (int64_t k = 0; k < members_; ++k)
    if (running[static_cast<size_t>(k)]) blocks_running.data_ptr<uint8_t>()[k / kLaneWidth] = 1;
  const torch::Tensor d_running = rt_->ToDeviceAsync(blocks_running);
  const torch::Tensor d_offsets = rt_->ToDeviceAsync(offsets_t_);
  const torch::Tensor d_corrections = train ? rt_->ToDeviceAsync(corrections_) : torch::Tensor();
  const torch::Tensor& d_masks = masks_;  // drawn on the device (DrawMasks)
  const int64_t per_thread = net_.ScratchFloats() / kLaneWidth;
  if (!d_scratch_.defined())
    d_scratch_ = torch::empty({blocks_ * kLaneWidth * per_thread}, torch::TensorOptions().device(rt_->device()));
  torch::Tensor& sums = train ? d_sums_ : d_val_sums_;
  LanePackWindow pw;
  pw.first = LaneBlock{d_params_.data_ptr<float>(), d_m_.data_ptr<float>(),
                       d_v_.defined() ? d_v_.data_ptr<float>() : nullptr, d_hyper_.data_ptr<float>(),
                       sums.data_ptr<double>()};
  pw.window.table = all.data_ptr<float>();
  pw.window.offsets = d_offsets.data_ptr<int64_t>();
  pw.window.len = len;
  pw.window.batch = batch;
  pw.window.corrections = train ? d_corrections.data_ptr<float>() : nullptr;
  pw.window.masks = masked ? d_masks.data_ptr<float>() : nullptr;
  pw.window.train = train;
  pw.blocks = blocks_;
  pw.param_stride = d_params_.stride(0);
  pw.hyper_stride = d_hyper_.stride(0);
  pw.sums_stride = sums.stride(0);
  pw.offsets_stride = d_offsets.stride(0);
  pw.corrections_stride = train ? steps * 2 * kLaneWidth : 0;
  pw.masks_stride = masked ? d_masks.stride(0) : 0;
  pw.running = d_running.data_ptr<uint8_t>();
  pw.scratch = d_scratch_.data_ptr<float>();
  pw.scratch_per_thread = per_thread;
  const Status s = launcher_->Window(net_, pw);
  TORCH_CHECK(s.ok(), s.message());
}

}  // namespace ens
