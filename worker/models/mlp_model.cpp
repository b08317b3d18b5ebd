#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>

#include "worker/device/cpu_only.h"
#include "worker/kernels/lane_kernel.h"
#include "worker/kernels/mlp_kernel.h"
#include "worker/models/lane_forward_source.h"
#include "worker/models/model.h"

namespace ens {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The BLAS's single-precision GEMM (Fortran ABI), as libtorch_cpu exports it (MKL in the
// torch wheel): the kernel at::mm itself ends in. Called per member on raw pointers, so a pack
// pays no per-member dispatch.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

// Row-major C [m, n] = beta * C + A' B', A' = A [m, k] (or A^T of A [k, m] when ta), B' = B [k, n]
// (or B^T of B [n, k] when tb); every matrix contiguous. Column-major BLAS computes C^T = B'^T A'^T.
void RowMajorGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta,
                  float* c) {
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n), ldc = ni;
  const float one = 1.0f;
  sgemm_(tb ? "T" : "N", ta ? "T" : "N", &ni, &mi, &ki, &one, b, &ldb, a, &lda, &beta, c, &ldc);
}

// `t` [K, r, c] with contiguous member slices that start on 64-byte boundaries (AlignedSlices):
// `t` itself when it already is, else a copy.
torch::Tensor AlignedCopy(const torch::Tensor& t) {
  const int64_t slice = t.size(1) * t.size(2);
  const bool aligned = t.is_contiguous() && (slice % 16 == 0 || t.size(0) == 1) &&
                       reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0;
  if (aligned) return t;
  torch::Tensor a = AlignedSlices(t.size(0), t.size(1), t.size(2), t.options());
  a.copy_(t);
  return a;
}

// Member k's slice of an AlignedSlices-like tensor [K, r, c] (contiguous slices, stride(0) apart).
const float* Slice(const torch::Tensor& t, int64_t k) { return t.data_ptr<float>() + k * t.stride(0); }
float* MutableSlice(torch::Tensor& t, int64_t k) { return t.data_ptr<float>() + k * t.stride(0); }

// y = x W^T + b per member: x [K,B,I], w [K,O,I], b [K,1,O] -> [K,B,O]; the MLP's layers on
// CUDA, and on the CPU those of networks too big for the fused kernel (FusedMlp below).
// On the CPU each member's products are GEMMs of its own over 64-byte-aligned slices, the calls
// a lone member makes, writing into AlignedSlices: the BLAS picks its kernel by shape and
// alignment, so member k's bits do not depend on K. A batched product (bmm) does not promise
// that: with 16 or 32 hidden units it gave packed members other last bits than lone ones.
// On CUDA one batched product per operand (ARCHITECTURE.md: what holds there).
// `tensor_ops`: the CUDA branch wherever x is (Model::UseTensorOps).
struct PackLinear : torch::autograd::Function<PackLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, bool tensor_ops) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["tensor_ops"] = tensor_ops;
    const int64_t K = x.size(0), B = x.size(1), I = x.size(2), O = w.size(1);
    torch::Tensor out = AlignedSlices(K, B, O, x.options());
    out.copy_(b.expand({K, B, O}));
    if (!x.is_cpu() || tensor_ops) {
      out.baddbmm_(x, w.transpose(1, 2));
      return out;
    }
    RequireCpu("the per-member GEMMs", {x, w, b});
    const torch::Tensor xa = AlignedCopy(x), wa = AlignedCopy(w);
    for (int64_t k = 0; k < K; ++k) RowMajorGemm(false, true, B, O, I, Slice(xa, k), Slice(wa, k), 1.0f, MutableSlice(out, k));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const torch::Tensor& g = grads[0];
    const int64_t K = x.size(0), B = x.size(1), I = x.size(2), O = w.size(1);
    torch::Tensor gx = AlignedSlices(K, B, I, g.options());
    torch::Tensor gw = AlignedSlices(K, O, I, g.options());
    if (!g.is_cpu() || ctx->saved_data["tensor_ops"].toBool()) {
      at::bmm_out(gx, g, w);
      at::bmm_out(gw, g.transpose(1, 2), x);
    } else {
      RequireCpu("the per-member GEMMs", {g, x, w});
      const torch::Tensor ga = AlignedCopy(g), xa = AlignedCopy(x), wa = AlignedCopy(w);
      for (int64_t k = 0; k < K; ++k) {
        RowMajorGemm(false, false, B, I, O, Slice(ga, k), Slice(wa, k), 0.0f, MutableSlice(gx, k));
        RowMajorGemm(true, false, O, I, B, Slice(ga, k), Slice(xa, k), 0.0f, MutableSlice(gw, k));
      }
    }
    return {gx, gw, g.sum(1, /*keepdim=*/true), torch::Tensor()};
  }
};

// The fused kernel's view of a pack (mlp_kernel.h): every tensor float32, contiguous, on the
// CPU. params: w0, b0, w1, b1, ...; masks: one per hidden layer, numel 0 where no member of
// the pack drops out.
MlpShape ShapeOf(const torch::Tensor& x, torch::TensorList params, const std::vector<Activation>& acts) {
  MlpShape s;
  s.members = x.size(0), s.batch = x.size(1), s.inputs = x.size(2);
  for (size_t l = 0; l < params.size(); l += 2) s.units.push_back(params[l].size(1));
  s.activations = acts;
  return s;
}

MlpParams PointersOf(torch::TensorList params, torch::TensorList masks) {
  RequireCpu("the fused MLP", params);
  RequireCpu("the fused MLP", masks);
  MlpParams p;
  for (size_t l = 0; l < params.size(); l += 2) {
    TORCH_CHECK(params[l].is_contiguous() && params[l + 1].is_contiguous(), "the fused MLP needs contiguous parameters");
    p.weights.push_back(params[l].data_ptr<float>());
    p.biases.push_back(params[l + 1].data_ptr<float>());
  }
  for (const auto& m : masks) p.masks.push_back(m.numel() > 0 ? m.data_ptr<float>() : nullptr);
  return p;
}

// Members per intra-op task: disjoint member ranges, so the thread count changes no bit.
constexpr int64_t kMembersPerTask = 16;

// The fused kernel runs a network of at most this many weights (multiply-adds per row, all
// layers): there the per-member BLAS calls and the pack-wide kernels cost more than the
// arithmetic. Above it the BLAS's own kernels win (9 -> U -> U -> 1, batch 32: at U = 6 the
// fused kernel took 0.3x the GEMMs' time, at 16 1.3x, at 32 2.1x; BENCHMARKS.md, issue 34
// item 3).
// The choice depends on the layers alone, which every member of a pack shares (PackKey), so a
// member takes the same path alone and packed.
constexpr int64_t kFusedMaxWeights = 256;

// The kernel's forward of contiguous x over the pack's member ranges; with `tape`, keeps
// there what the backward needs.
torch::Tensor RunForward(const torch::Tensor& xc, torch::TensorList params, const std::vector<Activation>& acts,
                         torch::TensorList masks, torch::Tensor* tape) {
  RequireCpu("the fused MLP", {xc});
  const MlpShape s = ShapeOf(xc, params, acts);
  const MlpParams p = PointersOf(params, masks);
  torch::Tensor out = torch::empty({s.members, s.batch, s.units.back()}, xc.options());
  if (tape != nullptr) *tape = torch::empty({s.members * s.TapeFloats()}, xc.options());
  float* t = tape != nullptr ? tape->data_ptr<float>() : nullptr;
  at::parallel_for(0, s.members, kMembersPerTask, [&](int64_t first, int64_t last) {
    MlpForward(s, p, xc.data_ptr<float>(), out.data_ptr<float>(), t, first, last);
  });
  return out;
}

// The whole MLP of a pack on the CPU as one autograd node: forward and backward run member
// by member in mlp_kernel.cpp, so member k's bits do not depend on its pack.
struct FusedMlp : torch::autograd::Function<FusedMlp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, torch::TensorList params,
                               const std::vector<Activation>* acts, const std::vector<torch::Tensor>* masks) {
    const torch::Tensor xc = x.contiguous();
    torch::Tensor tape;
    torch::Tensor out = RunForward(xc, params, *acts, *masks, &tape);
    std::vector<torch::Tensor> saved = {xc, tape};
    saved.insert(saved.end(), params.begin(), params.end());
    saved.insert(saved.end(), masks->begin(), masks->end());
    ctx->save_for_backward(saved);
    std::vector<int64_t> codes;
    for (Activation a : *acts) codes.push_back(static_cast<int64_t>(a));
    ctx->saved_data["activations"] = codes;
    ctx->saved_data["x_grad"] = x.requires_grad();
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    std::vector<Activation> acts;
    for (int64_t c : ctx->saved_data["activations"].toIntVector()) acts.push_back(static_cast<Activation>(c));
    const auto n_params = static_cast<int64_t>(2 * (acts.size() + 1));
    const torch::Tensor& xc = saved[0];
    const torch::Tensor& tape = saved[1];
    torch::TensorList params(saved.data() + 2, n_params);
    torch::TensorList masks(saved.data() + 2 + n_params, acts.size());
    const MlpShape s = ShapeOf(xc, params, acts);
    const MlpParams p = PointersOf(params, masks);
    const torch::Tensor g = grads[0].contiguous();
    RequireCpu("the fused MLP", {xc, tape, g});
    variable_list out = {ctx->saved_data["x_grad"].toBool() ? torch::empty_like(xc) : torch::Tensor()};
    std::vector<float*> gw, gb;
    for (int64_t i = 0; i < n_params; ++i) {
      out.push_back(torch::empty_like(params[i]));
      (i % 2 == 0 ? gw : gb).push_back(out.back().data_ptr<float>());
    }
    float* gx = out[0].defined() ? out[0].data_ptr<float>() : nullptr;
    at::parallel_for(0, s.members, kMembersPerTask, [&](int64_t first, int64_t last) {
      MlpBackward(s, p, tape.data_ptr<float>(), g.data_ptr<float>(), gw, gb, gx, first, last);
    });
    out.emplace_back();  // acts
    out.emplace_back();  // masks
    return out;
  }
};

torch::Tensor Activate(const torch::Tensor& h, Activation act) {
  switch (act) {
    case Activation::kRelu: return torch::relu(h);
    case Activation::kTanh: return torch::tanh(h);
    case Activation::kSigmoid: return torch::sigmoid(h);
    case Activation::kSwish: return h * torch::sigmoid(h);
    case Activation::kGelu: return torch::gelu(h);
    case Activation::kLinear: return h;
  }
  return h;
}

// The same activation as TorchScript applied to `h` (one statement, or none for linear).
std::string ActivateSource(Activation act) {
  switch (act) {
    case Activation::kRelu: return "    h = torch.relu(h)\n";
    case Activation::kTanh: return "    h = torch.tanh(h)\n";
    case Activation::kSigmoid: return "    h = torch.sigmoid(h)\n";
    case Activation::kSwish: return "    h = h * torch.sigmoid(h)\n";
    case Activation::kGelu: return "    h = torch.gelu(h)\n";
    case Activation::kLinear: return "";
  }
  return "";
}

torch::Tensor InitKernel(Initializer init, int64_t in, int64_t out, at::Generator& gen) {
  return InitWeight(init, {out, in}, gen);
}

// Dropout masks as a counter-based hash: member k keeps element e of its d-th draw when
// Hash32(Hash32(e ^ a) ^ b) / 2^8 >= rate * 2^24, with a and b made from (its seed, d). Every
// member's masks come from one batch of elementwise integer kernels (a few per layer and step,
// whatever K), and member k's mask depends only on its seed, d and e: the same bits in a pack
// of any size, on any device. Values stay below 2^32 and multipliers below 2^31, so int64
// arithmetic never overflows.
constexpr int64_t kLow32 = 0xffffffffLL;

uint32_t Mix32(uint64_t x) {  // host side: seeds and draw counters to 32-bit keys
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

torch::Tensor Hash32(torch::Tensor h) {  // h: int64 values in [0, 2^32)
  h = h.bitwise_xor(h.bitwise_right_shift(16)).mul_(0x7feb352dLL).bitwise_and_(kLow32);
  h = h.bitwise_xor(h.bitwise_right_shift(15)).mul_(0x2c1b3c6dLL).bitwise_and_(kLow32);
  return h.bitwise_xor(h.bitwise_right_shift(16));
}

class PackedMlp : public Model {
 public:
  PackedMlp(const std::vector<ModelMember>& members, int features, int outputs, torch::Device device) {
    const MemberSpec& s0 = *members[0].spec;
    for (const auto& l : s0.layers) activations_.push_back(l.activation);
    std::vector<std::vector<torch::Tensor>> w(s0.layers.size() + 1), b(s0.layers.size() + 1);
    std::vector<int64_t> key_a, key_b;
    for (const auto& m : members) {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(m.init_seed);
      int64_t in = features;
      for (size_t l = 0; l <= s0.layers.size(); ++l) {
        int64_t out = l < s0.layers.size() ? m.spec->layers[l].units : outputs;
        w[l].push_back(InitKernel(m.spec->initializer, in, out, gen));
        b[l].push_back(InitBias(m.spec->initializer, in, out, gen));  // after its weights, as torch's Linear
        in = out;
      }
      key_a.push_back(Mix32(m.dropout_seed));
      key_b.push_back(Mix32(m.dropout_seed ^ 0x9e3779b97f4a7c15ULL));
    }
    seed_keys_[0] = torch::tensor(key_a).view({-1, 1, 1}).to(device);
    seed_keys_[1] = torch::tensor(key_b).view({-1, 1, 1}).to(device);
    const int64_t k = static_cast<int64_t>(members.size());
    int64_t weights = 0;
    for (const auto& layer : w) weights += layer[0].numel();
    fused_ = weights <= kFusedMaxWeights;
    for (size_t l = 0; l < w.size(); ++l) {
      weights_.push_back(torch::stack(w[l]).to(device).requires_grad_(true));
      biases_.push_back(torch::stack(b[l]).unsqueeze(1).to(device).requires_grad_(true));
      if (l == s0.layers.size()) break;
      std::vector<int64_t> threshold;
      std::vector<float> keep;
      bool any = false;
      for (const auto& m : members) {
        const double rate = m.spec->layers[l].dropout;
        threshold.push_back(static_cast<int64_t>(std::llround(rate * 16777216.0)));
        keep.push_back(static_cast<float>(1.0 - rate));
        any = any || rate > 0;
      }
      dropout_.push_back(any ? LayerDropout{torch::tensor(threshold).view({-1, 1, 1}).to(device),
                                            torch::tensor(keep).view({-1, 1, 1}).to(device)}
                             : LayerDropout{});
    }
  }

  int64_t Members() const override { return weights_[0].size(0); }

  std::vector<torch::Tensor> Parameters() const override {
    std::vector<torch::Tensor> p;
    for (size_t l = 0; l < weights_.size(); ++l) {
      p.push_back(weights_[l]);
      p.push_back(biases_[l]);
    }
    return p;
  }

  std::vector<torch::Tensor> Kernels() const override { return weights_; }

  torch::Tensor Forward(const torch::Tensor& x, bool training) override {
    if (!x.is_cpu() || !fused_ || tensor_ops_) return LayerByLayer(x, training);
    std::vector<torch::Tensor> masks;  // drawn in the order LayerByLayer draws them
    for (size_t l = 0; l + 1 < weights_.size(); ++l) {
      torch::Tensor m = training ? DropoutMask(x.size(1), weights_[l].size(1), l, x.device()) : torch::Tensor();
      masks.push_back(m.defined() ? m.contiguous() : torch::empty({0}, x.options()));
    }
    const std::vector<torch::Tensor> params = Parameters();
    if (torch::GradMode::is_enabled()) return FusedMlp::apply(x, torch::TensorList(params), &activations_, &masks);
    return RunForward(x.contiguous(), params, activations_, masks, nullptr);
  }

  NamedTensors MemberTensors(const std::vector<torch::Tensor>& slices) const override {
    // On the CPU a slice is usually contiguous already: one operator, not three, a tensor.
    auto on_host = [](const torch::Tensor& t) {
      return t.device().is_cpu() && t.is_contiguous() ? t.detach() : t.detach().to(torch::kCPU).contiguous();
    };
    NamedTensors out;
    for (size_t l = 0; l < weights_.size(); ++l) {
      std::string name = "layer" + std::to_string(l);
      out.emplace_back(name + "_weight", on_host(slices[2 * l]));
      out.emplace_back(name + "_bias", on_host(slices[2 * l + 1][0]));
    }
    return out;
  }

  std::string MemberForwardSource() const override {
    if (lane_forward_) return LaneForwardSource(weights_.size(), activations_);
    std::string src;
    for (size_t l = 0; l < weights_.size(); ++l) {
      std::string name = "self.layer" + std::to_string(l);
      src += "    h = torch.addmm(" + name + "_bias, h, " + name + "_weight.t())\n";
      if (l + 1 < weights_.size()) src += ActivateSource(activations_[l]);
    }
    return src;
  }

  void UseTensorOps() override { tensor_ops_ = true; }

  std::optional<MlpLayers> Layers() override {
    return MlpLayers{weights_, biases_, activations_, [this](int64_t batch, int64_t units, size_t layer) {
                       return DropoutMask(batch, units, layer, weights_[0].device());
                     }};
  }

  void AdoptLayers(std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases) override {
    weights_ = std::move(weights);
    biases_ = std::move(biases);
    tensor_ops_ = true;  // the fused kernel needs contiguous parameters of its own
  }

  void UseLaneForward() override { lane_forward_ = true; }

  std::vector<MemberStatement> MemberStatements() const override {
    if (lane_forward_) {
      std::vector<int64_t> units;
      for (const torch::Tensor& w : weights_) units.push_back(w.size(1));
      return {LaneForwardStatement(weights_[0].size(2), units, activations_)};
    }
    std::vector<MemberStatement> out;
    for (size_t l = 0; l < weights_.size(); ++l) {
      out.push_back([l](const NamedTensors& t, const torch::Tensor& h) {
        return torch::addmm(t[2 * l + 1].second, h, t[2 * l].second.t());
      });
      if (l + 1 < weights_.size() && activations_[l] != Activation::kLinear)  // linear: no statement
        out.push_back([act = activations_[l]](const NamedTensors&, const torch::Tensor& h) { return Activate(h, act); });
    }
    return out;
  }

 private:
  // A product a layer (PackLinear), then its activation and dropout: CUDA, and networks too
  // big for the fused kernel.
  torch::Tensor LayerByLayer(const torch::Tensor& x, bool training) {
    torch::Tensor h = x;
    for (size_t l = 0; l < weights_.size(); ++l) {
      h = PackLinear::apply(h, weights_[l], biases_[l], tensor_ops_);
      if (l + 1 == weights_.size()) break;
      h = Activate(h, activations_[l]);
      if (!training) continue;
      torch::Tensor mask = DropoutMask(h.size(1), h.size(2), l, h.device());
      if (mask.defined()) h = h * mask;
    }
    return h;
  }

  // Inverted dropout's multipliers [K, batch, units] of hidden layer `layer` (0 or
  // 1 / keep), each member with its own rate and mask stream (Hash32 above): all members in one
  // set of kernels. A member with rate 0 gets ones (h * 1 is h exactly, so it matches that
  // member trained alone). Undefined when no member of the pack drops out there (no draw).
  torch::Tensor DropoutMask(int64_t batch, int64_t units, size_t layer, torch::Device device) {
    const LayerDropout& d = dropout_[layer];
    if (!d.threshold.defined()) return {};
    const auto draw = static_cast<uint64_t>(draws_++);
    // This draw's keys per member, on the device (the draw number is a kernel argument, not a copy).
    torch::Tensor a = Hash32(seed_keys_[0].bitwise_xor(static_cast<int64_t>(Mix32(2 * draw))));
    torch::Tensor b = Hash32(seed_keys_[1].bitwise_xor(static_cast<int64_t>(Mix32(2 * draw + 1))));
    auto ints = torch::TensorOptions().dtype(torch::kLong).device(device);
    torch::Tensor e = torch::arange(batch * units, ints).view({1, batch, units});
    torch::Tensor r = Hash32(Hash32(e.bitwise_xor(a)).bitwise_xor_(b)).bitwise_right_shift_(8);
    return r.ge(d.threshold).to(torch::kFloat32).div_(d.keep);
  }

  struct LayerDropout {
    torch::Tensor threshold;  // [K, 1, 1] int64: rate * 2^24 (undefined: no member drops out)
    torch::Tensor keep;       // [K, 1, 1] float: 1 - rate
  };
  std::vector<Activation> activations_;
  bool fused_ = false;                 // the CPU runs FusedMlp (kFusedMaxWeights)
  bool tensor_ops_ = false;            // the CUDA path's tensor ops wherever the pack is
  bool lane_forward_ = false;          // UseLaneForward: members predict with the lane kernel's forward
  std::vector<LayerDropout> dropout_;  // per hidden layer
  torch::Tensor seed_keys_[2];         // [K, 1, 1] int64: two 32-bit keys of each member's seed
  int64_t draws_ = 0;                  // masks drawn so far (one per hidden layer and step)
  std::vector<torch::Tensor> weights_;  // [K, out, in]
  std::vector<torch::Tensor> biases_;   // [K, 1, out]
};

}  // namespace

torch::Tensor InitWeight(Initializer init, at::IntArrayRef shape, at::Generator& gen) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  int64_t receptive = 1;
  for (size_t d = 2; d < shape.size(); ++d) receptive *= shape[d];
  const double in = static_cast<double>(shape[1] * receptive), out = static_cast<double>(shape[0] * receptive);
  switch (init) {
    case Initializer::kLecunNormal:
      return at::randn(shape, gen, opts) * static_cast<float>(std::sqrt(1.0 / in));
    case Initializer::kHeUniform:
    case Initializer::kGlorotUniform:
    case Initializer::kTorchDefault: {
      const double limit = init == Initializer::kHeUniform      ? std::sqrt(6.0 / in)
                           : init == Initializer::kTorchDefault ? std::sqrt(1.0 / in)  // kaiming_uniform, a = sqrt(5)
                                                                : std::sqrt(6.0 / (in + out));
      return at::rand(shape, gen, opts) * static_cast<float>(2 * limit) - static_cast<float>(limit);
    }
  }
  return {};
}

torch::Tensor InitBias(Initializer init, int64_t in, int64_t out, at::Generator& gen) {
  if (init != Initializer::kTorchDefault) return torch::zeros({out});
  const double limit = std::sqrt(1.0 / static_cast<double>(in));
  return at::rand({out}, gen, torch::TensorOptions().dtype(torch::kFloat32)) * static_cast<float>(2 * limit) -
         static_cast<float>(limit);
}

torch::Tensor AlignedSlices(int64_t k, int64_t rows, int64_t cols, const torch::TensorOptions& opts) {
  constexpr int64_t kAlignFloats = 16;  // 64 bytes of float32; allocations are 64-byte aligned
  int64_t stride = (rows * cols + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  torch::Tensor buf = torch::empty({std::max<int64_t>(1, k * stride)}, opts.requires_grad(false));
  return buf.as_strided({k, rows, cols}, {stride, cols, 1});
}

torch::Tensor FusedMlpForward(const torch::Tensor& x, torch::TensorList params, const std::vector<Activation>& acts,
                              const std::vector<torch::Tensor>& masks, bool with_grad) {
  if (with_grad) return FusedMlp::apply(x, params, &acts, &masks);
  return RunForward(x.contiguous(), params, acts, masks, nullptr);
}

std::unique_ptr<Model> BuildMlp(const std::vector<ModelMember>& members, int features, int outputs,
                                torch::Device device) {
  return std::make_unique<PackedMlp>(members, features, outputs, device);
}

MemberStatement LaneForwardStatement(int64_t features, const std::vector<int64_t>& units,
                                     const std::vector<Activation>& activations) {
  static const LaneIsa isa = ChosenLaneIsa();
  TORCH_CHECK(!units.empty() && static_cast<int64_t>(units.size()) <= kLaneMaxLayers &&
                  activations.size() + 1 == units.size(),
              "a lane member has 1 to ", kLaneMaxLayers, " layers and an activation for each hidden one");
  LaneNet net;
  net.inputs = features;
  net.layers = static_cast<int64_t>(units.size());
  for (int64_t l = 0; l < net.layers; ++l) {
    net.units[l] = units[static_cast<size_t>(l)];
    if (l + 1 < net.layers) net.activations[l] = activations[static_cast<size_t>(l)];
  }
  return [net](const NamedTensors& t, const torch::Tensor& h) {
    TORCH_CHECK(h.is_cpu() && h.scalar_type() == torch::kFloat && h.dim() == 2 && h.stride(1) == 1 &&
                    h.size(1) == net.inputs && static_cast<int64_t>(t.size()) >= 2 * net.layers,
                "a lane member's forward takes float rows of its ", net.inputs, " features");
    // The member's parameters in the kernel's order: each layer's weights [O][I], then its biases.
    std::vector<float> params(static_cast<size_t>(net.Params()));
    size_t at = 0;
    for (int64_t l = 0; l < 2 * net.layers; ++l) {
      const torch::Tensor x = t[l].second.contiguous();
      TORCH_CHECK(x.scalar_type() == torch::kFloat && at + x.numel() <= params.size(), "tensor ", t[l].first,
                  " does not fit the member's network");
      std::memcpy(params.data() + at, x.data_ptr<float>(), static_cast<size_t>(x.numel()) * sizeof(float));
      at += static_cast<size_t>(x.numel());
    }
    TORCH_CHECK(at == params.size(), "the member's tensors do not fill its network");
    torch::Tensor out = torch::empty({h.size(0), net.units[net.layers - 1]}, torch::kFloat);
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(net.ScratchFloats()) + 16);
    float* aligned = scratch.data() + (16 - reinterpret_cast<uintptr_t>(scratch.data()) / 4 % 16) % 16;
    LaneForwardRows(isa, net, params.data(), h.data_ptr<float>(), h.stride(0), h.size(0), out.data_ptr<float>(), aligned);
    return out;
  };
}

}  // namespace ens
