// ScriptModel: a member whose network is the user's TorchScript module (model kind
// "torchscript"), trained by the one training loop (trainer.h) as a pack of one.
//
// The module's forward(x) maps standardised rows [batch, features] to [batch, outputs] (the
// objective's: a prediction, [mean, raw variance] for a Gaussian head, or class logits).
// Its parameters become the Model's, each a [1, ...] leaf of at least 3 dimensions (so the
// pack optimizer's per-member hyperparameters broadcast as they do over an MLP); before every
// forward the module's parameter slots are pointed at views of them.
// - init "member": every parameter of dimension >= 2 is drawn by the member's initializer from
//   its init seed (model.h: InitWeight), in the module's parameter order; the others are zero.
// - init "file": the file's values.
// Buffers (batch-norm statistics) start as in the file and change only by the module's own
// forward. Dropout inside the module draws from libtorch's global generator, which the model
// seeds with the member's dropout seed (the worker trains one pack at a time). Kernels (for
// l1/l2) are the parameters of dimension >= 2. The checkpoint holds the module as submodule
// "net" with the trained parameters (checkpoint.h).
// Includes libtorch: include only from worker/*/*.cpp files that already pay for it.
// Not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "common/base/status.h"
#include "worker/models/model.h"

namespace ens {

// Loads `path` on the CPU as float32 and runs forward on a zero batch [2, features]: the
// output must be [2, outputs] (outputs 0: any [2, n >= 1]; *width gets n when given). Errors
// name the path: a missing file (NotFound); not a TorchScript module, no forward(x), a forward
// that throws or an output of the wrong shape (InvalidArgument).
StatusOr<torch::jit::Module> LoadUserModule(const std::string& path, int features, int outputs, int* width = nullptr);

// The model of one member over `module` (LoadUserModule's; it becomes the model's own).
std::unique_ptr<Model> BuildScriptModel(const ModelMember& member, torch::jit::Module module, int outputs,
                                        torch::Device device);

// TorchScript runs in the plain interpreter (no profiling executor, no fusion): a module then
// computes the same bits on its first call as on its hundredth, in the worker as in a reload.
// Idempotent; called before any module is built or loaded.
void UsePlainTorchScriptExecutor();

}  // namespace ens
