// Predictor: the libtorch side of ensemblectl's predict, verify and export.
//
// Used by `ensemble-worker predict` (ensemblectl predict), `ensemble-worker compare`
// (ensemblectl verify), `ensemble-worker export` and `member-module` (ensemblectl export) and `ensemble-worker
// check-model` (ensemblectl validate-config, ensembled at run start), so neither ensemblectl
// nor ensembled ever loads libtorch. Checkpoints are member modules (checkpoint.h). Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

// Makes this process's libtorch compute on one thread (intra- and inter-op), as a member trains
// with threads_per_worker = 1: a prediction's bits then do not depend on how many cores the
// machine has or how busy they are (a TorchScript member's own layers run torch's kernels,
// whose results may depend on how a product is split across threads). The tools call it first.
void ComputeOnOneThread();

// Predictions of each checkpoint on `rows` (row-major [n, features]); result[member][row].
StatusOr<std::vector<std::vector<float>>> PredictWithCheckpoints(
    const std::vector<std::string>& checkpoints, const std::vector<float>& rows, int features);

// `ensemble-worker predict --stream`: loads the checkpoints once, then answers batches on
// in_fd/out_fd until end of input. A batch is a little-endian uint64 row count n followed by
// n x features float32; the answer is n x members float32 ([member][row]). n = 0 or end of
// input ends the stream. An error (a short batch, a checkpoint that does not load) is
// returned; nothing is written for the batch at fault.
Status PredictStream(const std::vector<std::string>& checkpoints, int features, int in_fd, int out_fd);

// Compares every tensor of two checkpoints bit for bit. Result: {"equal": bool,
// "tensor": first differing name, "max_abs_diff": value, "blocked": [a, b]} (tensor absent
// when equal; blocked: whether each module's forward runs in fixed blocks, checkpoint.h).
StatusOr<nlohmann::json> CompareCheckpoints(const std::string& a, const std::string& b);

// Writes one TorchScript module over the member checkpoints to `output` (0600, durable):
// forward(x) -> (mean, std) over the members, the std calibrated per target as
// sqrt(scale^2 std^2 + noise^2) (sigma_calibration.h; a Gaussian head's total std) when
// `scale` and `noise` are given (one value per target each; empty: the raw std).
Status ExportEnsemble(const std::vector<std::string>& checkpoints, const std::string& output,
                      const std::vector<double>& scale = {}, const std::vector<double>& noise = {});

// Writes the member module of `checkpoint` (a weights file, whose module is built now, a module
// file, or a member directory) to `output` (0600, durable): what a user loads with torch.jit.load.
Status WriteMemberModule(const std::string& checkpoint, const std::string& output);

// A TorchScript member's module (script_model.h: LoadUserModule): loads `path` and runs forward
// on a zero batch [2, features]; the output must be [2, outputs] (outputs 0: [2, n >= 1]).
// Returns the output width n.
StatusOr<int> CheckUserModel(const std::string& path, int features, int outputs);

}  // namespace ens
