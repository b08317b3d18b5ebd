// EnvVars: every ENSEMBLED_* environment variable the product reads, in one table, and the one
// accessor product code reads them through. A variable not in the table is not read; a new
// one is added here first (its name, what it does, who it is for).
//
// Who a variable is for:
//   kOperator  documented for people who run ensembled (the service's unit may set it);
//   kInternal  set by one of our programs for another (a child it starts); never by hand;
//   kTest      a test hook: tests set it, for the process or a child it starts, to make the
//              product fail or measure on purpose. Unset (always, in production), it changes
//              nothing. The fault ones are answered through fault_injection.h's Faults.
// The variables the product sets for programs it starts (ENSEMBLED_MEMBER, ENSEMBLED_SLOT, the
// mutation hook's ENSEMBLED_ROUND_DIR, ...) are an interface of those programs, described where
// they are set (command_member.h, mutation_view.h), and not read back here. Non-ENSEMBLED
// variables (CUDA_VISIBLE_DEVICES, JOURNAL_STREAM, RUNTIME_DIRECTORY, PYTORCH_CUDA_ALLOC_CONF,
// CUBLAS_WORKSPACE_CONFIG) are read where they are used.
// Thread-safe as getenv is (nothing here sets a variable).
#pragma once

namespace ens {

enum class EnvVar {
  // operator
  kLogLevel,
  kWorker,
  kLaneIsa,
  kLaneCuda,
  kGpuCount,
  // internal
  kControlSocketMode,
  // test (and measurement) hooks
  kNvmlLibrary,
  kTorchCudaLib,
  kLaneCudaLib,
  kCountOps,
  kTrainPath,
  kCrashAt,
  kTestNonFinite,
  kTestFailWrite,
  kTestOomAbove,
  kTestTorchError,
  kTestSigkillAbove,
  kTestSlowPhase,
  kTestHang,
  kTestSendRaw,
  kTestFailJournal,
  kTestCudaSees,
};

enum class EnvVarAudience { kOperator, kInternal, kTest };

struct EnvVarInfo {
  EnvVar var;
  const char* name;
  EnvVarAudience audience;
  const char* use;
};

// The table, in EnvVar's order (env_vars.cpp checks the order at compile time).
inline constexpr EnvVarInfo kEnvVars[] = {
    {EnvVar::kLogLevel, "ENSEMBLED_LOG_LEVEL", EnvVarAudience::kOperator,
     "spdlog level of every program (trace, debug, info, warn, error); default info"},
    {EnvVar::kWorker, "ENSEMBLED_WORKER", EnvVarAudience::kOperator,
     "the ensemble-worker binary ensembled and ensemblectl start; default: the one beside them"},
    {EnvVar::kLaneIsa, "ENSEMBLED_LANE_ISA", EnvVarAudience::kOperator,
     "the lane kernel's block code on CPU (baseline, avx2, avx512, thread); default the widest vector one"},
    {EnvVar::kLaneCuda, "ENSEMBLED_LANE_CUDA", EnvVarAudience::kOperator,
     "0: GPU lane packs train with PackStep instead of the CUDA lane kernel"},
    {EnvVar::kGpuCount, "ENSEMBLED_GPU_COUNT", EnvVarAudience::kOperator,
     "take the machine to have this many GPUs, without asking NVML (tests without GPUs, odd machines)"},
    {EnvVar::kControlSocketMode, "ENSEMBLED_CONTROL_SOCKET_MODE", EnvVarAudience::kInternal,
     "0666: the run's control socket for a run `ensembled serve` starts as its submitter"},
    {EnvVar::kNvmlLibrary, "ENSEMBLED_NVML_LIBRARY", EnvVarAudience::kTest,
     "the libnvidia-ml to load instead of libnvidia-ml.so.1 (the fake NVML of the GPU tests)"},
    {EnvVar::kTorchCudaLib, "ENSEMBLED_TORCH_CUDA_LIB", EnvVarAudience::kTest,
     "the libtorch_cuda a GPU worker loads instead of libtorch_cuda.so"},
    {EnvVar::kLaneCudaLib, "ENSEMBLED_LANE_CUDA_LIB", EnvVarAudience::kTest,
     "the lane kernel's CUDA plugin a GPU worker loads instead of the libens_lane_cuda.so beside it"},
    {EnvVar::kCountOps, "ENSEMBLED_COUNT_OPS", EnvVarAudience::kTest,
     "set: the worker counts operators per step (gpu-check's measurement)"},
    {EnvVar::kTrainPath, "ENSEMBLED_TRAIN_PATH", EnvVarAudience::kTest,
     "autograd: packs train through autograd where PackStep would (gpu-check's comparison)"},
    {EnvVar::kCrashAt, "ENSEMBLED_CRASH_AT", EnvVarAudience::kTest,
     "<point>[:<n>]: the n-th CrashPoint(point) SIGKILLs the process (fault_injection.h)"},
    {EnvVar::kTestNonFinite, "ENSEMBLED_TEST_NONFINITE", EnvVarAudience::kTest,
     "<task_id>[,...]: those tasks' training loss is NaN from the first step"},
    {EnvVar::kTestFailWrite, "ENSEMBLED_TEST_FAIL_WRITE", EnvVarAudience::kTest,
     "<task_id>:<attempt>[,...]: that attempt's member-directory write fails with an I/O error"},
    {EnvVar::kTestOomAbove, "ENSEMBLED_TEST_OOM_ABOVE", EnvVarAudience::kTest,
     "<n>: a pack of more than n members throws libtorch's out-of-memory error"},
    {EnvVar::kTestTorchError, "ENSEMBLED_TEST_TORCH_ERROR", EnvVarAudience::kTest,
     "<task_id>[,...]: a pack holding one of them throws a plain c10::Error"},
    {EnvVar::kTestSigkillAbove, "ENSEMBLED_TEST_SIGKILL_ABOVE", EnvVarAudience::kTest,
     "<n>: a worker given a pack of more than n members SIGKILLs itself"},
    {EnvVar::kTestSlowPhase, "ENSEMBLED_TEST_SLOW_PHASE", EnvVarAudience::kTest,
     "<phase>:<ms>: every step of that task phase takes ms longer"},
    {EnvVar::kTestHang, "ENSEMBLED_TEST_HANG", EnvVarAudience::kTest,
     "<task_id>:<attempt>[:<phase>]: that attempt stops for good at its start or that phase"},
    {EnvVar::kTestSendRaw, "ENSEMBLED_TEST_SEND_RAW", EnvVarAudience::kTest,
     "<task_id>:<file>: the worker sends each string of the JSON array in file as a raw message"},
    {EnvVar::kTestFailJournal, "ENSEMBLED_TEST_FAIL_JOURNAL", EnvVarAudience::kTest,
     "<event>: every journal write holding a record of that event fails with an I/O error"},
    {EnvVar::kTestCudaSees, "ENSEMBLED_TEST_CUDA_SEES", EnvVarAudience::kTest,
     "none, given or a UUID: what CUDA is taken to report to a GPU worker (cuda_support.h)"},
};

// The variable's name ("ENSEMBLED_...").
const char* Name(EnvVar var);
// Its value, null when unset. The pointer is getenv's: valid until the variable is set again.
const char* EnvVarValue(EnvVar var);

}  // namespace ens
