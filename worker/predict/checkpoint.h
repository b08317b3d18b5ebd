// Checkpoint: one member as a callable TorchScript module, and an ensemble of them.
//
// A member the worker predicts eagerly (an MLP) is saved as weights.bin (common/state/member_weights.h:
// its spec, buffers and this module's source, no module), and its module is built from it when
// someone loads it (LoadMember); a TorchScript member is saved as its module, checkpoint.pt (as
// every member was before 2026-12-06; LoadMember reads both). The module, either way:
// a TorchScript archive (torch.jit.save format) holding
//   attribute "spec"   str: the MemberSpec JSON
//   buffers            the model's named tensors (MLP: layer<i>_weight [out, in], layer<i>_bias [out])
//                      then x_mean, x_std [features], y_mean, y_std [1] (float32; several
//                      regression targets: [targets])
//   submodule "net"    a TorchScript member's own module, with its trained parameters
//   forward(x)         raw feature rows [n, features] -> predictions [n] in target units
//                      (regression; several targets: [n, targets]), rows of [mean, variance] [n, 2] in target units (a
//                      gaussian_nll head), or class probabilities [n, classes] (classification)
// so `torch.jit.load(path)(x)` works from Python and C++ alike. forward(x) runs in blocks of
// kPredictBlockRows rows (the last padded with zero rows) with 64-byte aligned rows, through
// forward_block(x) ([kPredictBlockRows, features] -> [outputs]): a row's numbers are a
// function of the row and the member only, whatever the batch and the row's place in it
// (docs/internals.md "Batch-independent predictions"). The worker computes a member's holdout
// and pool predictions with this same forward (PredictRows; eagerly, without the module, for a
// kind that has MemberStatements), so every caller gets the same bits.
// An ensemble export holds the members as submodules m<i> and forward(x) returns the mean and
// the (population) std over them: of predictions [n] (or [n, targets]), or of class probabilities [n, classes];
// for Gaussian heads the mixture's (mean, aleatoric std, epistemic std, total std), each [n];
// blocked like the members, so a row's numbers do not depend on the batch either.
// Includes libtorch: include only from worker/*/*.cpp files that already pay for it.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/state/member_weights.h"
#include "common/base/status.h"
#include "worker/models/model.h"

namespace ens {

// The rows of one forward block: every GEMM of a prediction has this many rows. A multiple of
// 16, so a block's elementwise kernels end on whole vectors, and of 6 (3 x 64): MKL's AVX2
// sgemm on Intel CPUs splits a block's rows into chunks and runs them 6 at a time, and the
// rows of a chunk's partial group of 6 take another summation order. With 256 rows, rows 174,
// 175, 254 and 255 did (tests/prediction_bits_test.cpp under MKL_CBWR=AVX2 on a Xeon with
// AVX-512); with 192 (and 48, 96, 144) no row did, for 22 layer shapes from 3 x 7 to 512 x 512,
// on 1 and 2 threads, and on the AVX-512 path every row keeps the bits it had with 256.
inline constexpr int64_t kPredictBlockRows = 192;

struct MemberParts {
  MemberSpec spec;
  int classes = 0;                        // 0: regression; else the softmax head's width
  NamedTensors tensors;                   // Model::MemberTensors
  std::string forward_source;             // Model::MemberForwardSource
  std::vector<MemberStatement> statements;  // Model::MemberStatements (empty: predict through the module)
  std::optional<torch::jit::Module> net;  // Model::MemberNet: submodule "net" (a TorchScript member)
  torch::Tensor x_mean, x_std, y_mean, y_std;
};

// The member module (in memory; nothing is written).
StatusOr<torch::jit::Module> BuildMemberModule(const MemberParts& parts);
// The same module from a weights file's contents (`origin` names it in errors): buffer for
// buffer and method for method what BuildMemberModule made of the parts that were saved.
StatusOr<torch::jit::Module> BuildMemberModule(const MemberWeights& weights, const std::string& origin);
// weights.bin's bytes for a member (the module's spec, buffers and source; no module is built).
// REQUIRES: no parts.net (a TorchScript member is saved as its module); float32 tensors.
StatusOr<std::string> MemberWeightsFileBytes(const MemberParts& parts);

// Member modules of one architecture (one pack): the first is compiled, every later one is a
// copy of it holding its own spec and buffers. Compiling TorchScript costs milliseconds, which
// a pack of thousands would pay per member. The modules equal BuildMemberModule's.
class MemberModuleBuilder {
 public:
  StatusOr<torch::jit::Module> Build(const MemberParts& parts);

 private:
  std::optional<torch::jit::Module> prototype_;
  std::string prototype_source_;
};

// `module` as a TorchScript archive's bytes (what SaveModule writes).
StatusOr<std::string> ModuleBytes(const torch::jit::Module& module);
// Writes `module` with the project's checked write (0600); durable: fsynced, else left for
// a later SyncFileSystem (atomic_file.h).
Status SaveModule(const torch::jit::Module& module, const std::string& path, bool durable = true);
// Loads a member checkpoint: a weights file (its module built now), a member module file, or a
// member directory (its MemberFiles::StoredCheckpoint); a packed member's files by the same
// paths (member_view.h). A file that is not one is Corruption naming the path.
StatusOr<torch::jit::Module> LoadMember(const std::string& path);
// A member checkpoint as parts that predict without its module (PredictRows on them: the
// module's bits, without building it or running the TorchScript interpreter), when it is a
// weights file whose source is exactly what BuildMemberModule writes for a lane member of its
// spec and tensors (lane_forward_source.h): `predict` on lane members. None for any other
// checkpoint, including a weights file of another form or one whose tensors do not fit its
// spec (LoadMember builds its module, and says what is wrong). Errors: an unreadable file,
// as LoadMember's.
StatusOr<std::optional<MemberParts>> LoadLaneMemberParts(const std::string& path);
// Every buffer of a member module, in checkpoint order, then the parameters and buffers of its
// "net" (verify compares them bit for bit).
NamedTensors MemberBuffers(const torch::jit::Module& member);
int64_t MemberFeatures(const torch::jit::Module& member);
// Predictions for rows [n, features] (any strides), forward called on blocks of exactly
// kPredictBlockRows rows (the last padded with zero rows): n values, n x targets, n x 2
// (Gaussian heads), or n x classes probabilities (row-major) for a classifier.
std::vector<float> PredictRows(torch::jit::Module& member, const torch::Tensor& x);
// The same predictions, bit for bit, without building the module: forward_block's operations
// (standardise, each statement given aligned rows, the head) called eagerly on the same blocks.
// About a tenth of a millisecond less a member than building the module and running it through
// the TorchScript interpreter, which a pack of thousands pays per member.
// A regression member's standardisation, row copies and head run as plain loops between its
// statements (worker/kernels/predict_rows_kernel.h: the same operations, so the same bits; a block
// runs its statements' operators and no others, tests/trainer_predict_rows_test.cpp); other
// heads, and outputs a loop cannot take, through PredictRowsByOps. REQUIRES: !parts.statements.empty() and no parts.net.
std::vector<float> PredictRows(const MemberParts& parts, const torch::Tensor& x);
// The same predictions with every step a libtorch operator, as the module's forward_block
// spells it (the reference PredictRows's loops are tested against).
std::vector<float> PredictRowsByOps(const MemberParts& parts, const torch::Tensor& x);

// train_state.pt: what a warm_start member leaves for its next round (torch pickle of a
// dict): "step" (int64: optimizer steps taken), "param.<i>" (the member's parameters as its
// checkpoint holds them, in Model::Parameters() order, each its slice [...]), "m.<i>" and
// "v.<i>" (its optimizer moments at its last step; no v for SGD).
struct TrainState {
  int64_t step = 0;
  std::vector<torch::Tensor> params, m, v;
};
// The file's bytes (CPU tensors).
std::string TrainStateBytes(const TrainState& state);
// A file that is not a train state (or is missing) is an error naming the path: Corruption,
// or NotFound when there is no file.
StatusOr<TrainState> LoadTrainState(const std::string& path);

// One module over the given member checkpoints; forward(x) -> (mean, std) (a Gaussian head:
// mean, aleatoric, epistemic and total std). With `scale` and `noise` (one each per target),
// the std (total std) is sqrt(scale^2 std^2 + noise^2): the round's calibration.
StatusOr<torch::jit::Module> BuildEnsembleModule(const std::vector<std::string>& checkpoints,
                                                 const std::vector<double>& scale = {},
                                                 const std::vector<double>& noise = {});

}  // namespace ens
