#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cmath>

#include "worker/model.h"

namespace ens {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = x W^T + b per member, with outputs (and input gradients) in AlignedSlices so that
// member k's bits do not depend on K. x [K,B,I], w [K,O,I], b [K,1,O] -> [K,B,O].
struct PackLinear : torch::autograd::Function<PackLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
    ctx->save_for_backward({x, w});
    torch::Tensor out = AlignedSlices(x.size(0), x.size(1), w.size(1), x.options());
    out.copy_(b.expand({x.size(0), x.size(1), w.size(1)}));
    out.baddbmm_(x, w.transpose(1, 2));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const torch::Tensor& g = grads[0];
    torch::Tensor gx = AlignedSlices(x.size(0), x.size(1), x.size(2), g.options());
    at::bmm_out(gx, g, w);
    torch::Tensor gw = AlignedSlices(w.size(0), w.size(1), w.size(2), g.options());
    at::bmm_out(gw, g.transpose(1, 2), x);
    return {gx, gw, g.sum(1, /*keepdim=*/true)};
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
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  switch (init) {
    case Initializer::kLecunNormal:
      return at::randn({out, in}, gen, opts) * static_cast<float>(std::sqrt(1.0 / in));
    case Initializer::kHeUniform:
    case Initializer::kGlorotUniform: {
      double limit = init == Initializer::kHeUniform ? std::sqrt(6.0 / in) : std::sqrt(6.0 / (in + out));
      return at::rand({out, in}, gen, opts) * static_cast<float>(2 * limit) - static_cast<float>(limit);
    }
  }
  return {};
}

// A generator of the device's kind, seeded: one per member for its dropout masks.
at::Generator DeviceGenerator(torch::Device device, uint64_t seed) {
  at::Generator g = device.is_cuda() ? at::detail::getCUDAHooks().getDefaultGenerator(device.index()).clone()
                                     : at::make_generator<at::CPUGeneratorImpl>(seed);
  g.set_current_seed(seed);
  return g;
}

class PackedMlp : public Model {
 public:
  PackedMlp(const std::vector<ModelMember>& members, int features, int outputs, torch::Device device) {
    const MemberSpec& s0 = *members[0].spec;
    for (const auto& l : s0.layers) activations_.push_back(l.activation);
    std::vector<std::vector<torch::Tensor>> w(s0.layers.size() + 1);
    for (const auto& m : members) {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(m.init_seed);
      int64_t in = features;
      for (size_t l = 0; l <= s0.layers.size(); ++l) {
        int64_t out = l < s0.layers.size() ? m.spec->layers[l].units : outputs;
        w[l].push_back(InitKernel(m.spec->initializer, in, out, gen));
        in = out;
      }
      generators_.push_back(DeviceGenerator(device, m.dropout_seed));
    }
    const int64_t k = static_cast<int64_t>(members.size());
    for (size_t l = 0; l < w.size(); ++l) {
      weights_.push_back(torch::stack(w[l]).to(device).requires_grad_(true));
      biases_.push_back(torch::zeros({k, 1, w[l][0].size(0)}).to(device).requires_grad_(true));
      if (l == s0.layers.size()) break;
      std::vector<float> rate;
      for (const auto& m : members) rate.push_back(static_cast<float>(m.spec->layers[l].dropout));
      dropout_.push_back(rate);
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
    torch::Tensor h = x;
    for (size_t l = 0; l < weights_.size(); ++l) {
      h = PackLinear::apply(h, weights_[l], biases_[l]);
      if (l + 1 == weights_.size()) break;
      h = Activate(h, activations_[l]);
      if (training) h = Dropout(h, l);
    }
    return h;
  }

  NamedTensors MemberTensors(const std::vector<torch::Tensor>& slices) const override {
    NamedTensors out;
    for (size_t l = 0; l < weights_.size(); ++l) {
      std::string name = "layer" + std::to_string(l);
      out.emplace_back(name + "_weight", slices[2 * l].detach().to(torch::kCPU).contiguous());
      out.emplace_back(name + "_bias", slices[2 * l + 1][0].detach().to(torch::kCPU).contiguous());
    }
    return out;
  }

  std::string MemberForwardSource() const override {
    std::string src;
    for (size_t l = 0; l < weights_.size(); ++l) {
      std::string name = "self.layer" + std::to_string(l);
      src += "    h = torch.addmm(" + name + "_bias, h, " + name + "_weight.t())\n";
      if (l + 1 < weights_.size()) src += ActivateSource(activations_[l]);
    }
    return src;
  }

 private:
  // Inverted dropout with each member's own rate and generator; a member with rate 0 gets a
  // mask of ones (h * 1 is h exactly, so it matches that member trained alone).
  torch::Tensor Dropout(const torch::Tensor& h, size_t layer) {
    const std::vector<float>& rate = dropout_[layer];
    bool any = false;
    for (float r : rate) any = any || r > 0;
    if (!any) return h;
    std::vector<torch::Tensor> masks;
    auto opts = h.options().requires_grad(false);
    for (size_t k = 0; k < rate.size(); ++k) {
      if (rate[k] <= 0) {
        masks.push_back(torch::ones({h.size(1), h.size(2)}, opts));
        continue;
      }
      torch::Tensor m = torch::empty({h.size(1), h.size(2)}, opts).bernoulli_(1.0 - rate[k], generators_[k]);
      masks.push_back(m.div_(1.0 - rate[k]));
    }
    return h * torch::stack(masks);
  }

  std::vector<Activation> activations_;
  std::vector<std::vector<float>> dropout_;  // [hidden layer][member]
  std::vector<at::Generator> generators_;
  std::vector<torch::Tensor> weights_;  // [K, out, in]
  std::vector<torch::Tensor> biases_;   // [K, 1, out]
};

}  // namespace

torch::Tensor AlignedSlices(int64_t k, int64_t rows, int64_t cols, const torch::TensorOptions& opts) {
  constexpr int64_t kAlignFloats = 16;  // 64 bytes of float32; allocations are 64-byte aligned
  int64_t stride = (rows * cols + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  torch::Tensor buf = torch::empty({std::max<int64_t>(1, k * stride)}, opts.requires_grad(false));
  return buf.as_strided({k, rows, cols}, {stride, cols, 1});
}

std::unique_ptr<Model> BuildMlp(const std::vector<ModelMember>& members, int features, int outputs,
                                torch::Device device) {
  return std::make_unique<PackedMlp>(members, features, outputs, device);
}

}  // namespace ens
