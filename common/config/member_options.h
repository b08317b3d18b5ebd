// MemberOptions: the closed sets of choices a member spec makes (activation, initializer,
// loss, optimizer, early-stopping monitor, split, model kind, TorchScript init) and the run's task kind, as enums;
// what each model kind is (ModelKindTraits) and which engines take each loss (LossTraits).
//
// The config reader turns each option string into its enum once, when the config is read;
// an unknown string is a config error naming its JSON pointer. Past that point nothing
// compares option strings, so no unknown value can silently take a default. The names below
// are the only spelling of each option on the wire, in member.json and in checkpoints.
// Pure functions. Thread-safe.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string_view>

namespace ens {

enum class Activation { kRelu, kTanh, kSigmoid, kSwish, kGelu, kLinear };
// torch_default: what torch.nn.Linear does (kaiming_uniform with a = sqrt(5), i.e. weights and
// biases uniform in +-1/sqrt(fan_in)); the others draw weights and start biases at 0.
enum class Initializer { kGlorotUniform, kHeUniform, kLecunNormal, kTorchDefault };
enum class LossKind { kMse, kMae, kHuber, kCrossEntropy, kGaussianNll };
enum class OptimizerKind { kAdam, kAdamW, kSgd };
enum class Monitor { kValLoss, kValMae, kValMse };
enum class SplitKind { kRandom, kBootstrap };
enum class ModelKind { kMlp, kCommand, kTorchscript };
// A TorchScript member's first weights: drawn by the member's initializer, or the file's.
enum class ScriptInit { kMember, kFile };
// What a run's members learn: one regression target, or a class among a fixed list.
enum class TaskKind { kRegression, kClassification };

// Name tables, indexed by the enum's value; the order is the enum's order.
inline constexpr std::array<std::string_view, 6> kActivationNames{"relu", "tanh", "sigmoid",
                                                                  "swish", "gelu", "linear"};
inline constexpr std::array<std::string_view, 4> kInitializerNames{"glorot_uniform", "he_uniform",
                                                                   "lecun_normal", "torch_default"};
inline constexpr std::array<std::string_view, 5> kLossNames{"mse", "mae", "huber", "cross_entropy", "gaussian_nll"};
inline constexpr std::array<std::string_view, 3> kOptimizerNames{"adam", "adamw", "sgd"};
inline constexpr std::array<std::string_view, 3> kMonitorNames{"val_loss", "val_mae", "val_mse"};
inline constexpr std::array<std::string_view, 2> kSplitNames{"random", "bootstrap"};
inline constexpr std::array<std::string_view, 3> kModelKindNames{"mlp", "command", "torchscript"};
inline constexpr std::array<std::string_view, 2> kScriptInitNames{"member", "file"};
inline constexpr std::array<std::string_view, 2> kTaskKindNames{"regression", "classification"};

// NamesOf(E{}): the name table of enum E. The one overload set Name and Parse build on.
constexpr std::span<const std::string_view> NamesOf(Activation) { return kActivationNames; }
constexpr std::span<const std::string_view> NamesOf(Initializer) { return kInitializerNames; }
constexpr std::span<const std::string_view> NamesOf(LossKind) { return kLossNames; }
constexpr std::span<const std::string_view> NamesOf(OptimizerKind) { return kOptimizerNames; }
constexpr std::span<const std::string_view> NamesOf(Monitor) { return kMonitorNames; }
constexpr std::span<const std::string_view> NamesOf(SplitKind) { return kSplitNames; }
constexpr std::span<const std::string_view> NamesOf(ModelKind) { return kModelKindNames; }
constexpr std::span<const std::string_view> NamesOf(ScriptInit) { return kScriptInitNames; }
constexpr std::span<const std::string_view> NamesOf(TaskKind) { return kTaskKindNames; }

// What the rest of the program asks of a model kind besides its name: one row a kind, in the
// enum's order (the one table a new kind adds a row to; worker/models/model_factory.cpp builds it).
struct ModelKindTraits {
  bool program;   // the user's program trains it (worker/models/command_member.h): no layers or optimizer of ours
  bool layers;    // built from the member's "layers" (at least one required); else they do not apply
  bool packable;  // members with the same PackKey train as one pack (orchestrator/run/pack_plan.h)
};
inline constexpr std::array<ModelKindTraits, 3> kModelKindTraits{{
    {.program = false, .layers = true, .packable = true},     // mlp
    {.program = true, .layers = false, .packable = false},    // command
    {.program = false, .layers = false, .packable = false},   // torchscript
}};
static_assert(kModelKindTraits.size() == kModelKindNames.size(), "a row of traits per model kind");
constexpr const ModelKindTraits& TraitsOf(ModelKind k) { return kModelKindTraits[static_cast<size_t>(k)]; }

// What the config and the engines ask of a loss besides its name: one row a loss, in the enum's
// order (the one table a new loss adds a row to). A regression loss's value and gradient are
// its struct in worker/kernels/loss_formulas.h, which every engine runs: the lane kernel, the
// autograd loop (worker/train/objective.cpp) and PackStep.
struct LossTraits {
  bool regression;  // elementwise on a regression error (loss_formulas.h); else cross_entropy, classification's
  int outputs;      // a member's outputs per target: 1, or 2 (the mean and gaussian_nll's variance)
  bool lane;        // the lane kernel trains it (common/config/lane_fit.h asks the rest)
  bool pack_step;   // PackStep trains it (worker/train/pack_step.h asks the rest); one output only
};
inline constexpr std::array<LossTraits, 5> kLossTraits{{
    {.regression = true, .outputs = 1, .lane = true, .pack_step = true},     // mse
    {.regression = true, .outputs = 1, .lane = true, .pack_step = true},     // mae
    {.regression = true, .outputs = 1, .lane = true, .pack_step = true},     // huber
    {.regression = false, .outputs = 1, .lane = false, .pack_step = false},  // cross_entropy
    {.regression = true, .outputs = 2, .lane = true, .pack_step = false},    // gaussian_nll
}};
static_assert(kLossTraits.size() == kLossNames.size(), "a row of traits per loss");
constexpr const LossTraits& TraitsOf(LossKind k) { return kLossTraits[static_cast<size_t>(k)]; }

// The name of an option value.
template <typename E>
constexpr std::string_view Name(E v) {
  return NamesOf(v)[static_cast<size_t>(v)];
}

// Parse<E>(s): the enum named s, or nullopt for an unknown name.
template <typename E>
constexpr std::optional<E> Parse(std::string_view s) {
  const auto names = NamesOf(E{});
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace ens
