// MemberOptions: the closed sets of choices a member spec makes (activation, initializer,
// loss, optimizer, early-stopping monitor, split), as enums.
//
// The config reader turns each option string into its enum once, when the config is read;
// an unknown string is a config error naming its JSON pointer. Past that point nothing
// compares option strings, so no unknown value can silently take a default. The names below
// are the only spelling of each option on the wire, in member.json and in checkpoints.
// Pure functions. Thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace ens {

enum class Activation { kRelu, kTanh, kSigmoid, kSwish, kGelu, kLinear };
enum class Initializer { kGlorotUniform, kHeUniform, kLecunNormal };
enum class LossKind { kMse, kMae, kHuber };
enum class OptimizerKind { kAdam, kAdamW, kSgd };
enum class Monitor { kValLoss, kValMae, kValMse };
enum class SplitKind { kRandom, kBootstrap };

// Name tables, indexed by the enum's value; the order is the enum's order.
inline constexpr std::array<std::string_view, 6> kActivationNames{"relu", "tanh", "sigmoid",
                                                                  "swish", "gelu", "linear"};
inline constexpr std::array<std::string_view, 3> kInitializerNames{"glorot_uniform", "he_uniform",
                                                                   "lecun_normal"};
inline constexpr std::array<std::string_view, 3> kLossNames{"mse", "mae", "huber"};
inline constexpr std::array<std::string_view, 3> kOptimizerNames{"adam", "adamw", "sgd"};
inline constexpr std::array<std::string_view, 3> kMonitorNames{"val_loss", "val_mae", "val_mse"};
inline constexpr std::array<std::string_view, 2> kSplitNames{"random", "bootstrap"};

namespace member_options_internal {
template <typename E, size_t N>
constexpr std::optional<E> Find(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}
}  // namespace member_options_internal

constexpr std::string_view Name(Activation v) { return kActivationNames[static_cast<size_t>(v)]; }
constexpr std::string_view Name(Initializer v) { return kInitializerNames[static_cast<size_t>(v)]; }
constexpr std::string_view Name(LossKind v) { return kLossNames[static_cast<size_t>(v)]; }
constexpr std::string_view Name(OptimizerKind v) { return kOptimizerNames[static_cast<size_t>(v)]; }
constexpr std::string_view Name(Monitor v) { return kMonitorNames[static_cast<size_t>(v)]; }
constexpr std::string_view Name(SplitKind v) { return kSplitNames[static_cast<size_t>(v)]; }

// Parse<E>(s): the enum named s, or nullopt for an unknown name.
template <typename E>
constexpr std::optional<E> Parse(std::string_view s);
template <>
constexpr std::optional<Activation> Parse<Activation>(std::string_view s) {
  return member_options_internal::Find<Activation>(kActivationNames, s);
}
template <>
constexpr std::optional<Initializer> Parse<Initializer>(std::string_view s) {
  return member_options_internal::Find<Initializer>(kInitializerNames, s);
}
template <>
constexpr std::optional<LossKind> Parse<LossKind>(std::string_view s) {
  return member_options_internal::Find<LossKind>(kLossNames, s);
}
template <>
constexpr std::optional<OptimizerKind> Parse<OptimizerKind>(std::string_view s) {
  return member_options_internal::Find<OptimizerKind>(kOptimizerNames, s);
}
template <>
constexpr std::optional<Monitor> Parse<Monitor>(std::string_view s) {
  return member_options_internal::Find<Monitor>(kMonitorNames, s);
}
template <>
constexpr std::optional<SplitKind> Parse<SplitKind>(std::string_view s) {
  return member_options_internal::Find<SplitKind>(kSplitNames, s);
}

}  // namespace ens
