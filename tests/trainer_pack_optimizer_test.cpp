// PackOptimizer (worker/train/pack_optimizer.h) against libtorch's own optimizers: each member of a
// pack, with its own lr, weight decay and momentum, takes the steps torch::optim::Adam, AdamW
// or SGD takes on that member's slice alone with the same gradients (within float rounding),
// including a warm-started member whose bias correction counts its earlier steps, and with
// L1/L2 as the gradient of l1 |w| + l2 w^2 taken by autograd. Both step paths: the CPU's pass
// per member slice and the tensor ops CUDA runs (StepPath::kTensorOps on CPU tensors).
#include "support/trainer_fixture.h"

#include "worker/train/pack_optimizer.h"

namespace ens {
namespace {

std::vector<MemberSpec> Specs(OptimizerKind kind) {
  std::vector<MemberSpec> specs(3);
  for (size_t k = 0; k < specs.size(); ++k) {
    specs[k].optimizer = kind;
    specs[k].lr = 1e-3 * static_cast<double>(k + 1);
    specs[k].weight_decay = 0.01 * static_cast<double>(k);
    specs[k].momentum = 0.3 * static_cast<double>(k);
  }
  return specs;
}

// Every kind on both step paths.
std::vector<std::pair<OptimizerKind, StepPath>> Cases(std::initializer_list<OptimizerKind> kinds) {
  std::vector<std::pair<OptimizerKind, StepPath>> out;
  for (OptimizerKind k : kinds)
    for (StepPath p : {StepPath::kByDevice, StepPath::kTensorOps}) out.emplace_back(k, p);
  return out;
}

// Member k's reference optimizer over its own copy of the slice.
std::unique_ptr<torch::optim::Optimizer> Reference(OptimizerKind kind, const MemberSpec& s, torch::Tensor p) {
  switch (kind) {
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{p}, torch::optim::AdamOptions(s.lr));
    case OptimizerKind::kAdamW:
      return std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{p},
                                                   torch::optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
    case OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(
          std::vector<torch::Tensor>{p}, torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay));
  }
  return nullptr;
}

TEST_CASE("each member's PackOptimizer steps are torch's Adam, AdamW and SGD on its slice alone",
          "[trainer][optimizer]") {
  for (auto [kind, path] : Cases({OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kSgd})) {
    CAPTURE(static_cast<int>(kind), static_cast<int>(path));
    const std::vector<MemberSpec> specs = Specs(kind);
    std::vector<const MemberSpec*> ptrs;
    for (const auto& s : specs) ptrs.push_back(&s);
    torch::manual_seed(7);
    torch::Tensor packed = torch::randn({3, 4, 5}).requires_grad_(true);
    const torch::Tensor initial = packed.detach().clone();
    PackOptimizer opt(ptrs, {packed}, {}, {}, path);
    std::vector<torch::Tensor> alone;
    std::vector<std::unique_ptr<torch::optim::Optimizer>> ref;
    for (int64_t k = 0; k < 3; ++k) {
      alone.push_back(packed[k].detach().clone().requires_grad_(true));
      ref.push_back(Reference(kind, specs[static_cast<size_t>(k)], alone.back()));
    }
    for (int step = 0; step < 25; ++step) {
      const torch::Tensor g = torch::randn({3, 4, 5});
      opt.ZeroGrad();
      packed.mutable_grad() = g.clone();
      opt.Step();
      for (int64_t k = 0; k < 3; ++k) {
        ref[static_cast<size_t>(k)]->zero_grad();
        alone[static_cast<size_t>(k)].mutable_grad() = g[k].clone();
        ref[static_cast<size_t>(k)]->step();
      }
    }
    for (int64_t k = 0; k < 3; ++k) {
      CAPTURE(k);
      CHECK(torch::allclose(packed[k].detach(), alone[static_cast<size_t>(k)].detach(), 1e-5, 1e-6));
      // The parameters moved (25 steps of at least lr 1e-3 each).
      CHECK((packed[k].detach() - initial[k]).abs().max().item<float>() > 1e-3f);
    }
  }
}

TEST_CASE("L1 and L2 on penalised parameters step as torch's optimizers on the loss with the penalty",
          "[trainer][optimizer]") {
  for (auto [kind, path] : Cases({OptimizerKind::kAdam, OptimizerKind::kSgd})) {
    CAPTURE(static_cast<int>(kind), static_cast<int>(path));
    std::vector<MemberSpec> specs = Specs(kind);
    specs[0].l1 = 0.0, specs[0].l2 = 0.0;  // member 0 takes no penalty
    specs[1].l1 = 0.05, specs[1].l2 = 0.0;
    specs[2].l1 = 0.02, specs[2].l2 = 0.3;
    std::vector<const MemberSpec*> ptrs;
    for (const auto& s : specs) ptrs.push_back(&s);
    torch::manual_seed(5);
    torch::Tensor kernel = torch::randn({3, 4, 5}).requires_grad_(true);
    torch::Tensor bias = torch::randn({3, 1, 5}).requires_grad_(true);  // not penalised
    PackOptimizer opt(ptrs, {kernel, bias}, {}, {kernel}, path);
    std::vector<torch::Tensor> k_alone, b_alone;
    std::vector<std::unique_ptr<torch::optim::Optimizer>> ref;
    for (int64_t k = 0; k < 3; ++k) {
      k_alone.push_back(kernel[k].detach().clone().requires_grad_(true));
      b_alone.push_back(bias[k].detach().clone().requires_grad_(true));
      const MemberSpec& s = specs[static_cast<size_t>(k)];
      if (kind == OptimizerKind::kAdam)
        ref.push_back(std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{k_alone.back(), b_alone.back()},
                                                           torch::optim::AdamOptions(s.lr)));
      else
        ref.push_back(std::make_unique<torch::optim::SGD>(
            std::vector<torch::Tensor>{k_alone.back(), b_alone.back()},
            torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay)));
    }
    for (int step = 0; step < 25; ++step) {
      const torch::Tensor gk = torch::randn({3, 4, 5}), gb = torch::randn({3, 1, 5});
      opt.ZeroGrad();
      kernel.mutable_grad() = gk.clone();
      bias.mutable_grad() = gb.clone();
      opt.Step();
      for (int64_t k = 0; k < 3; ++k) {
        const MemberSpec& s = specs[static_cast<size_t>(k)];
        auto& o = *ref[static_cast<size_t>(k)];
        o.zero_grad();
        const torch::Tensor& w = k_alone[static_cast<size_t>(k)];
        torch::Tensor loss = (w * gk[k]).sum() + (b_alone[static_cast<size_t>(k)] * gb[k]).sum() +
                             s.l1 * w.abs().sum() + s.l2 * (w * w).sum();
        loss.backward();
        o.step();
      }
    }
    for (int64_t k = 0; k < 3; ++k) {
      CAPTURE(k);
      CHECK(torch::allclose(kernel[k].detach(), k_alone[static_cast<size_t>(k)].detach(), 1e-5, 1e-6));
      CHECK(torch::allclose(bias[k].detach(), b_alone[static_cast<size_t>(k)].detach(), 1e-5, 1e-6));
    }
  }
}

TEST_CASE("a warm-started member's Adam continues torch's Adam from the step it stopped at", "[trainer][optimizer]") {
  const std::vector<MemberSpec> specs = Specs(OptimizerKind::kAdam);
  torch::manual_seed(3);
  torch::Tensor ref_p = torch::randn({4, 5}).requires_grad_(true);
  torch::optim::Adam ref({ref_p}, torch::optim::AdamOptions(specs[0].lr));
  std::vector<torch::Tensor> grads;
  for (int step = 0; step < 20; ++step) grads.push_back(torch::randn({4, 5}));
  // Round 1: 12 steps of the reference; round 2 continues it for 8 more.
  for (int step = 0; step < 12; ++step) {
    ref.zero_grad();
    ref_p.mutable_grad() = grads[static_cast<size_t>(step)].clone();
    ref.step();
  }
  auto& state = static_cast<torch::optim::AdamParamState&>(*ref.state().at(ref_p.unsafeGetTensorImpl()));
  torch::Tensor packed = ref_p.detach().clone().unsqueeze(0).requires_grad_(true);
  PackOptimizer opt({&specs[0]}, {packed}, {12});
  opt.SetMemberMoments(0, {{state.exp_avg().clone()}, {state.exp_avg_sq().clone()}});
  for (int step = 12; step < 20; ++step) {
    ref.zero_grad();
    ref_p.mutable_grad() = grads[static_cast<size_t>(step)].clone();
    ref.step();
    opt.ZeroGrad();
    packed.mutable_grad() = grads[static_cast<size_t>(step)].unsqueeze(0).clone();
    opt.Step();
  }
  CHECK(opt.MemberSteps(0) == 20);
  CHECK(torch::allclose(packed[0].detach(), ref_p.detach(), 1e-5, 1e-6));
}

}  // namespace
}  // namespace ens
