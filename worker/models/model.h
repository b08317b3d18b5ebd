// Model: the network of a pack of K >= 1 members, as stacked parameters [K, ...].
//
// Training never mixes members: every parameter's leading dimension is the member, every
// operation on it is elementwise or a per-member matrix product, and each member's dropout
// masks come from its own hash stream (mlp_model.cpp), drawn for the whole pack at once. A member's slice therefore gets the same bits whether
// K is 1 or 512 (on the CPU; ARCHITECTURE.md says what holds on CUDA). Unpacked training is a
// pack of one.
//
// A model kind also knows how one member stands alone: its named tensors (or a module of its
// own) and the TorchScript source of its forward, which checkpoint.h turns into a callable
// checkpoint. The kinds: the packed MLP (below) and the user's TorchScript module
// (script_model.h, always a pack of one); BuildModel builds either.
// Includes libtorch: include only from worker/*/*.cpp files that already pay for it.
// Not thread-safe.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/config/config.h"
#include "common/base/status.h"

namespace ens {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
// One top-level statement of a member's forward source run eagerly: `h` -> the new `h`, reading
// the member's MemberTensors() (in their order) where the source reads self.<name>.
using MemberStatement = std::function<torch::Tensor(const NamedTensors& tensors, const torch::Tensor& h)>;

// An MLP pack's layers, as PackStep (pack_step.h) takes them over.
struct MlpLayers {
  std::vector<torch::Tensor> weights;   // per layer [K, out, in], the output layer last
  std::vector<torch::Tensor> biases;    // per layer [K, 1, out]
  std::vector<Activation> activations;  // per hidden layer
  // Hidden layer l's dropout multipliers for a batch, [K, batch, units], drawn from each
  // member's stream in the order the model's own forward draws them; undefined where no member
  // of the pack drops out. Valid while the model lives.
  std::function<torch::Tensor(int64_t batch, int64_t units, size_t layer)> dropout;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual int64_t Members() const = 0;
  // Every trainable tensor, stacked [K, ...], leaves that require grad (the optimizer's).
  virtual std::vector<torch::Tensor> Parameters() const = 0;
  // The tensors L1/L2 apply to (kernels, not biases); a subset of Parameters().
  virtual std::vector<torch::Tensor> Kernels() const = 0;
  // x [K, B, features] in standardised units -> outputs [K, B, outputs] (the objective's:
  // a standardised prediction, or class logits).
  // `training` draws dropout masks (each member from its own stream).
  virtual torch::Tensor Forward(const torch::Tensor& x, bool training) = 0;
  // One member's trainable tensors as they stand alone (CPU copies), named for the
  // checkpoint. `slices` are that member's slices of Parameters(), in the same order.
  virtual NamedTensors MemberTensors(const std::vector<torch::Tensor>& slices) const = 0;
  // TorchScript statements that map `h` (standardised features, [n, features]) to `h`
  // (outputs, [n, outputs]), reading the MemberTensors() names as attributes of self.
  // Every member of a pack has the same architecture, so one source serves them all.
  virtual std::string MemberForwardSource() const = 0;
  // MemberForwardSource()'s top-level statements, one function each, making the same ATen calls
  // on the same operands in the same order, so a member predicts with the same bits without
  // building its TorchScript module (checkpoint.h: PredictRows on MemberParts). Empty when the
  // kind has none: its members predict through their module.
  virtual std::vector<MemberStatement> MemberStatements() const { return {}; }
  // A module of the member's own that the forward source calls as self.net (with `slices` as
  // its parameters, on the CPU), or none when MemberTensors() hold everything.
  virtual std::optional<torch::jit::Module> MemberNet(const std::vector<torch::Tensor>& slices) const {
    (void)slices;
    return std::nullopt;
  }
  // From here on MemberForwardSource and MemberStatements are the lane kernel's forward
  // (lane_forward_source.h, lane_kernel.h LaneForwardRows) instead of the kind's own: a member the
  // lanes train predicts with their operations (the task's lane_predictions, protocol.h).
  // REQUIRES: the pack's members LaneFits (lane_fit.h); a kind without such members ignores it.
  virtual void UseLaneForward() {}
  // The CUDA path's tensor ops wherever the pack is (trainer.h TrainPath: tests and the kernel
  // count on a machine without a GPU): no CPU kernel from here on.
  virtual void UseTensorOps() {}
  // The layers PackStep can train, or none for a kind it cannot.
  virtual std::optional<MlpLayers> Layers() { return std::nullopt; }
  // From here on the model's parameters are `weights` and `biases` (views of PackStep's flat
  // tensor, shaped as Layers() gave them): Forward, Parameters and MemberTensors read them, and
  // the model runs tensor ops (UseTensorOps). REQUIRES: Layers() has a value.
  virtual void AdoptLayers(std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases) {
    (void)weights, (void)biases;
  }
};

// Per-member construction data of a pack.
struct ModelMember {
  const MemberSpec* spec = nullptr;
  uint64_t init_seed = 0;     // weight init (a CPU generator owned by the build)
  uint64_t dropout_seed = 0;  // keys this member's dropout mask stream
};

// The model of a pack, by its members' kind (worker/models/model_factory.cpp: one case a kind).
// Errors are the member's config or files (a TorchScript file missing or of the wrong shape),
// the same on every retry. REQUIRES: members of one kind, as pack_plan.h packs them.
StatusOr<std::unique_ptr<Model>> BuildModel(const std::vector<ModelMember>& members, int features, int outputs,
                                            torch::Device device);

// The MLP kind: hidden layers from the spec, a linear output layer of `outputs` units (1 for
// regression, one per class for classification).
// REQUIRES: every member has the same layer units and activations and the same initializer
// (PackKey equal); dropout rates may differ per member.
std::unique_ptr<Model> BuildMlp(const std::vector<ModelMember>& members, int features, int outputs,
                                torch::Device device);

// A lane member's forward as one eager statement (Model::UseLaneForward's, and a lane member's
// weights file's: checkpoint.h LoadLaneMemberParts): h [n, features] (CPU float rows, any row
// stride) -> the network's outputs [n, units.back()] by the lane kernel (lane_kernel.h
// LaneForwardRows), the bits of lane_forward_source.h's statements on the same rows. The
// statement reads the member's tensors layer<l>_weight [units[l], in] and layer<l>_bias
// [units[l]] in that order. Throws c10::Error for rows or tensors of other shapes.
// REQUIRES: 1 <= units.size() <= kLaneMaxLayers; activations.size() == units.size() - 1.
MemberStatement LaneForwardStatement(int64_t features, const std::vector<int64_t>& units,
                                     const std::vector<Activation>& activations);

// A kernel of `shape` [out, in, ...] drawn by `init` from `gen`, float32 on the CPU. The fans
// count the receptive field as torch does for convolutions: fan_in = in * prod(shape[2:]),
// fan_out = out * prod(shape[2:]). REQUIRES: shape has >= 2 dimensions.
torch::Tensor InitWeight(Initializer init, at::IntArrayRef shape, at::Generator& gen);
// A layer's first biases [out]: 0, or for torch_default uniform in +-1/sqrt(in) drawn from `gen`
// (after the layer's weights, as torch.nn.Linear draws them).
torch::Tensor InitBias(Initializer init, int64_t in, int64_t out, at::Generator& gen);

// A tensor [K, rows, cols] whose member slices each start on a 64-byte boundary. Batched
// matrix products on the CPU pick their kernel by the output's alignment: with every slice
// aligned as a lone member's is, slice k equals what K = 1 computes, bit for bit.
torch::Tensor AlignedSlices(int64_t k, int64_t rows, int64_t cols, const torch::TensorOptions& opts);

// The fused CPU kernel's forward of an MLP pack (what the MLP kind runs on the CPU for networks
// of at most 256 weights), as a function of its own: x [K, B, F]; params w0 [K, U0, F], b0
// [K, 1, U0], w1, b1, ...; masks one per hidden layer (numel 0: no dropout there). With
// `with_grad`, one autograd node whose backward is the kernel's. Throws c10::Error for a tensor
// not on the CPU (cpu_only.h).
torch::Tensor FusedMlpForward(const torch::Tensor& x, torch::TensorList params, const std::vector<Activation>& acts,
                              const std::vector<torch::Tensor>& masks, bool with_grad);

}  // namespace ens
