// Tests of common/config/member_options.h: every enum value has exactly one name, Parse is its
// inverse, and Parse accepts nothing but those exact names.
#include "common/config/member_options.h"

#include <catch2/catch.hpp>
#include <cctype>
#include <set>
#include <string>

namespace ens {
namespace {

// Checks Name/Parse of every value of E, whose name table is `names`, and that Parse
// rejects near misses of each name.
template <typename E, size_t N>
void CheckRoundTrip(const std::array<std::string_view, N>& names) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < N; ++i) {
    const E value = static_cast<E>(i);
    const std::string_view name = Name(value);
    INFO("value " << i << " named '" << std::string(name) << "'");
    CHECK(name == names[i]);
    CHECK_FALSE(name.empty());
    CHECK(seen.insert(name).second);  // names are distinct, so Parse is well defined
    REQUIRE(Parse<E>(name).has_value());
    CHECK(*Parse<E>(name) == value);

    std::string upper(name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK_FALSE(Parse<E>(upper).has_value());  // names are case-sensitive
    CHECK_FALSE(Parse<E>(std::string(name) + "x").has_value());
    CHECK_FALSE(Parse<E>(" " + std::string(name)).has_value());
    // A prefix may name another value ("adam" of "adamw"), never this one.
    CHECK(Parse<E>(name.substr(0, name.size() - 1)) != value);
  }
  CHECK_FALSE(Parse<E>("").has_value());
  CHECK_FALSE(Parse<E>("unknown").has_value());
}

TEST_CASE("every option value round-trips through its name", "[member_options]") {
  CheckRoundTrip<Activation>(kActivationNames);
  CheckRoundTrip<Initializer>(kInitializerNames);
  CheckRoundTrip<LossKind>(kLossNames);
  CheckRoundTrip<OptimizerKind>(kOptimizerNames);
  CheckRoundTrip<Monitor>(kMonitorNames);
  CheckRoundTrip<SplitKind>(kSplitNames);
}

TEST_CASE("a name of one option is not a value of another", "[member_options]") {
  CHECK_FALSE(Parse<LossKind>("adam").has_value());
  CHECK_FALSE(Parse<Monitor>("mse").has_value());  // the monitor is "val_mse"
  CHECK_FALSE(Parse<Activation>("glorot_uniform").has_value());
}

TEST_CASE("names and parsing are usable at compile time", "[member_options]") {
  static_assert(Name(OptimizerKind::kAdamW) == "adamw");
  static_assert(*Parse<SplitKind>("bootstrap") == SplitKind::kBootstrap);
  static_assert(!Parse<Initializer>("he_normal").has_value());
}

TEST_CASE("every loss's traits row is one its engines can take", "[member_options][loss]") {
  for (size_t i = 0; i < kLossNames.size(); ++i) {
    const LossTraits& t = TraitsOf(static_cast<LossKind>(i));
    INFO("loss " << std::string(kLossNames[i]));
    CHECK((t.outputs == 1 || t.outputs == 2));
    // The lane kernel and PackStep run loss_formulas.h's regression formulas only.
    if (!t.regression) CHECK_FALSE((t.lane || t.pack_step));
    if (t.pack_step) CHECK(t.outputs == 1);  // PackStep trains one output
  }
  static_assert(!TraitsOf(LossKind::kCrossEntropy).regression);
  static_assert(TraitsOf(LossKind::kGaussianNll).outputs == 2);
}

}  // namespace
}  // namespace ens
