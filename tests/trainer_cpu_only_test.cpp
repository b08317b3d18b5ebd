// The CPU-only kernels (worker/device/cpu_only.h) refuse a tensor that is not on the CPU with an error
// that names the kernel and the device, and their callers route tensors elsewhere to tensor ops.
// Meta-device tensors stand in for CUDA ones: they have shapes but no memory, so a kernel that
// read them would crash, not fail.
#include "support/trainer_fixture.h"

#include "worker/models/model.h"
#include "worker/train/objective.h"
#include "worker/train/pack_optimizer.h"

namespace ens {
namespace {

const torch::Device kMeta(torch::kMeta);

// The message of the c10::Error `f` throws ("" when it throws none).
template <class F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST_CASE("each CPU-only kernel refuses meta-device tensors with an error naming it and the device", "[cpu_only]") {
  const auto meta = torch::TensorOptions().device(kMeta);
  SECTION("the fused MLP, forward and backward") {
    std::vector<torch::Tensor> params = {torch::empty({2, 6, 9}, meta), torch::empty({2, 1, 6}, meta),
                                         torch::empty({2, 1, 6}, meta), torch::empty({2, 1, 1}, meta)};
    const std::vector<Activation> acts = {Activation::kRelu};
    const std::vector<torch::Tensor> masks = {torch::empty({0}, meta)};
    for (bool grad : {false, true}) {
      const std::string what =
          ErrorOf([&] { FusedMlpForward(torch::empty({2, 32, 9}, meta), params, acts, masks, grad); });
      CHECK_THAT(what, Catch::Contains("the fused MLP is a CPU kernel") && Catch::Contains("meta"));
    }
  }
  SECTION("the huber loss") {
    const std::string what = ErrorOf([&] { HuberLossOnCpu(torch::empty({3, 32}, meta), torch::empty({3}, meta)); });
    CHECK_THAT(what, Catch::Contains("the huber loss kernel is a CPU kernel") && Catch::Contains("meta"));
  }
  SECTION("the optimizer") {
    MemberSpec spec;
    spec.optimizer = OptimizerKind::kAdam;
    torch::Tensor p = torch::empty({2, 4, 5}, meta).requires_grad_(true);
    PackOptimizer opt({&spec, &spec}, {p}, {}, {}, StepPath::kCpuKernel);
    p.mutable_grad() = torch::empty({2, 4, 5}, meta);
    const std::string what = ErrorOf([&] { opt.Step(); });
    CHECK_THAT(what, Catch::Contains("the optimizer kernel is a CPU kernel") && Catch::Contains("meta"));
  }
}

TEST_CASE("off the CPU the model and the optimizer take the tensor ops, not the CPU kernels", "[cpu_only]") {
  MemberSpec spec;
  spec.layers = {{6, Activation::kTanh, 0.0}};  // relu has no meta kernel in libtorch 2.11
  spec.optimizer = OptimizerKind::kAdam;
  std::vector<ModelMember> members = {{&spec, 1, 2}, {&spec, 3, 4}};
  std::unique_ptr<Model> model = BuildMlp(members, 9, 1, kMeta);
  const torch::Tensor out = model->Forward(torch::empty({2, 32, 9}, torch::TensorOptions().device(kMeta)), true);
  CHECK(out.device().is_meta());
  CHECK(out.sizes() == torch::IntArrayRef({2, 32, 1}));
  PackOptimizer opt({&spec, &spec}, model->Parameters(), {}, model->Kernels());
  for (auto& p : model->Parameters()) p.mutable_grad() = torch::empty_like(p);
  CHECK(ErrorOf([&] { opt.Step(); }).empty());
}

}  // namespace
}  // namespace ens
