#include "common/base/env_vars.h"

#include <cstddef>
#include <cstdlib>
#include <iterator>

namespace ens {
namespace {

constexpr bool TableInEnumOrder() {
  for (size_t i = 0; i < std::size(kEnvVars); ++i)
    if (static_cast<size_t>(kEnvVars[i].var) != i) return false;
  return std::size(kEnvVars) == static_cast<size_t>(EnvVar::kTestCudaSees) + 1;
}
static_assert(TableInEnumOrder(), "kEnvVars lists every EnvVar once, in the enum's order");

}  // namespace

const char* Name(EnvVar var) { return kEnvVars[static_cast<size_t>(var)].name; }

const char* EnvVarValue(EnvVar var) { return std::getenv(Name(var)); }

}  // namespace ens
