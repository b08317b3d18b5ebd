// Mlp: the member network as plain tensors (kernels [out, in], biases [out]) plus the
// standardisation it was trained with, and its checkpoint format.
//
// Checkpoint (torch archive written by SaveCheckpoint, read by LoadCheckpoint):
//   "spec"          string: the MemberSpec JSON (enough to rebuild the model)
//   "layer<i>.weight", "layer<i>.bias"   i = 0..hidden layers (last one is the 1-unit output)
//   "norm.x_mean", "norm.x_std"          [features] float32
//   "norm.y_mean", "norm.y_std"          [1] float32
// Includes libtorch: include only from worker/*.cpp files that already pay for it.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace ens {

struct Mlp {
  MemberSpec spec;
  std::vector<torch::Tensor> weights;  // kernels, [out, in]
  std::vector<torch::Tensor> biases;   // [out]
  torch::Tensor x_mean, x_std, y_mean, y_std;

  // Forward in standardised units. `training` enables dropout (default generator).
  torch::Tensor Forward(const torch::Tensor& x, bool training) const;
  std::vector<torch::Tensor> Parameters() const;
  // Predictions in original units for raw rows [n, features] (standardises inside).
  torch::Tensor PredictRaw(const torch::Tensor& raw_x) const;
};

// Builds the layers for `features` inputs, initialised from `init_seed` with a generator
// owned by this call. Tensors are created on the CPU and moved to `device`.
Mlp BuildMlp(const MemberSpec& spec, int features, uint64_t init_seed, torch::Device device);

Status SaveCheckpoint(const Mlp& m, const std::string& path);
StatusOr<Mlp> LoadCheckpoint(const std::string& path);
// All named tensors of a checkpoint (verify compares them bit for bit).
StatusOr<std::vector<std::pair<std::string, torch::Tensor>>> CheckpointTensors(const std::string& path);

}  // namespace ens
