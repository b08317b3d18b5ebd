// PackStep: the training step of an MLP pack on the CUDA path in few kernels, without autograd.
//
// On a GPU a small pack's step costs its kernel launches, not its arithmetic (~5 us each):
// autograd's loop (a product and a bias copy a layer, the loss expression, its backward, the
// optimizer's tensor ops per parameter) launched ~170 a step whatever K. PackStep writes the
// step out by hand over one flat parameter tensor, so a step of a pack with L hidden layers
// and no dropout launches: L + 1 batched products and L activations forward; the loss's
// gradient in closed form (worker/kernels/loss_formulas.h's slopes: huber a clamp, mse an
// add, mae a sign); L + 1 products for the weights' gradients and L for the
// hidden inputs' (the network's input needs none); L activation backwards; the optimizer over
// the whole flat tensor (Adam: 5, AdamW: 6, SGD: 3-4; L1 and L2 only where a member of the
// pack asks for them). 2 hidden layers, Adam, huber: 18.
// Per window of batches (trainer.cpp: kPackStepWindowBytes) it gathers and standardises the
// window's rows (3 ops), copies the indices and the step sizes to the device (asynchronously
// from pinned memory), and sums the window's loss and metrics (about 12 ops): no per-step
// reduction, no host read in the loop. bench/step_kernels.cpp counts them (dispatch_count.h).
//
// Layout: member k's parameters are row k of one tensor [K, P + 1]: each layer's bias and
// weights as one augmented matrix [out, 1 + in] (column 0 the bias), layer after layer, then
// one constant -1. The layers' inputs carry a leading column of ones, so a layer is one batched
// product; the output layer's input also carries the standardised target in its last column,
// which meets the -1, so its product is the error e = prediction - target itself. The model's
// weight and bias tensors become views of it (Model::AdoptLayers): validation, snapshots and
// checkpoints read the parameters where they are.
//
// The formulas are the autograd loop's (pack_optimizer.h for the updates, objective.h for the
// losses, the model's dropout stream) up to float rounding: Adam's step is rewritten as
// p -= m / (sqrt(v) * A + E) with A = bc1 / (lr sqrt(bc2)), E = eps bc1 / lr per member and
// step, and the moments move by lerp. A member's results therefore differ from the CPU's in
// the last bits, and may depend on its pack (batched GEMMs pick kernels by shape): on CUDA the
// promise is the same bits for the same pack trained twice (ARCHITECTURE.md).
// Used only where it applies (PackStepFits); every other pack keeps the autograd loop.
// Includes libtorch: include only from worker/*/*.cpp files that already pay for it.
// Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "worker/models/model.h"

namespace ens {

// Whether PackStep can train a pack of these members: regression with one target, a loss of
// huber, mse or mae, no warm start (its moments stay in PackOptimizer's layout), and a model
// kind that gives its layers (Model::Layers) with one output.
bool PackStepFits(const std::vector<const MemberSpec*>& specs, int classes, int targets);

// The pack's standardisation: features [K, 1, F] and the target [K, 1].
struct PackStepNorm {
  torch::Tensor xm, xs, ym, ys;
  torch::Tensor adversarial_step;  // [K, 1, F], or undefined (LaneStep reads it; PackStep has none)
};

class PackStep {
 public:
  // Takes over the model's parameters (their current values) and makes the model's tensors
  // views of its own. REQUIRES: PackStepFits; model.Layers() has a value.
  PackStep(Model& model, const std::vector<const MemberSpec*>& specs, const PackStepNorm& norm);

  // The test hook's NaN per member (trainer.cpp PoisonMask) [K], or undefined.
  void SetPoison(const torch::Tensor& poison);

  // A window of whole batches: ix [K, len] (row indices of `all`, on its device), `all` [N, F + 1];
  // `to_device` copies a host tensor to the pack's device (DeviceRuntime::ToDeviceAsync).
  void BeginWindow(const torch::Tensor& all, const torch::Tensor& ix, int64_t batch,
                   const std::function<torch::Tensor(const torch::Tensor&)>& to_device);
  // One optimizer step on the window's rows [first, first + rows).
  void Step(int64_t first, int64_t rows);
  // Adds the window's loss and metric sums (mae, mse in the target's units) per member to
  // loss_sum [K] and sums[i] [K] (double, on the device).
  void EndWindow(torch::Tensor& loss_sum, std::vector<torch::Tensor>& sums);

 private:
  void SetHyper(const std::vector<const MemberSpec*>& specs, const std::vector<float>& kernel_mask,
                const torch::TensorOptions& opts);  // the per-member columns, from the constructor
  struct Layer {
    int64_t in = 0, out = 0, offset = 0;  // the augmented matrix [out, 1 + in] at row offset
    Activation activation = Activation::kLinear;
    torch::Tensor w_aug;                  // [K, out, 1 + in] view of flat_
    torch::Tensor g_aug;                  // the same view of the gradient
    torch::Tensor pre, post, act, mask;   // hidden layers: [K, B, out] buffers; post [K, B, 1 + out]
    torch::Tensor grad_post, grad_pre;    // [K, B, out]
  };
  void StepBody(int64_t first, int64_t rows);
  void Forward(int64_t first, int64_t rows);
  void Backward(int64_t first, int64_t rows);
  void Update();
  torch::Tensor Input(size_t layer, int64_t first, int64_t rows) const;  // layer's input [K, rows, 1 + in]
  torch::Tensor Activated(size_t layer, int64_t first, int64_t rows) const;
  torch::Tensor ActivationBackward(size_t layer, const torch::Tensor& grad_post, int64_t first, int64_t rows);

  OptimizerKind kind_;
  LossKind loss_;
  std::function<torch::Tensor(int64_t batch, int64_t units, size_t layer)> dropout_;
  int64_t members_ = 0, features_ = 0, params_ = 0;
  std::vector<Layer> layers_;   // hidden layers, then the output layer
  torch::Tensor flat_;          // [K, P + 1]
  torch::Tensor grad_;          // [2, K, P + 1] (Adam: [1] holds g * g) or [1, K, P + 1]
  torch::Tensor state_;         // Adam: [2, K, P] (m, v); SGD: [1, K, P] (momentum buffer)
  torch::Tensor denom_;         // Adam: [K, P]
  torch::Tensor moment_weight_;  // Adam: [2, 1, 1] (1 - beta1, 1 - beta2)
  torch::Tensor decay_, weight_decay_, momentum_, neg_lr_;  // [K, 1]
  torch::Tensor l1_, l2_;       // [K, P] (undefined when no member asks)
  torch::Tensor delta_, neg_delta_;  // huber: [K, 1, 1]
  torch::Tensor mean_, std_;    // [K, 1, F + 1]: features then target
  torch::Tensor ys_;            // [K, 1]
  torch::Tensor poison_;        // [K, 1, 1] or undefined
  torch::Tensor inputs_;        // window: [K, len, 1 + F + 1]: ones, features, target
  torch::Tensor last_in_;       // window, with hidden layers: [K, len, 1 + U + 1]
  torch::Tensor errors_;        // window: [K, len, 1]
  torch::Tensor residual_;      // [K, B, 1]
  torch::Tensor table_;         // Adam, this window: [steps, 2, K, 1] (A, E)
  int64_t window_rows_ = 0, window_step_ = 0, batch_ = 0;
  int64_t steps_ = 0;           // optimizer steps taken
  std::vector<double> lr_;      // per member
};

}  // namespace ens
