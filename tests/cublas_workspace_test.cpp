// EnsureCublasWorkspaceConfig (common/base/cublas_workspace.h): a worker started without
// CUBLAS_WORKSPACE_CONFIG sets it before CUDA starts; a value the user set stays.
#include "common/base/cublas_workspace.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

namespace ens {
namespace {

TEST_CASE("the worker sets CUBLAS_WORKSPACE_CONFIG when it is unset or empty and keeps a user's value",
          "[cublas]") {
  ::unsetenv(kCublasWorkspaceVariable);
  CHECK(EnsureCublasWorkspaceConfig() == ":4096:8");
  REQUIRE(std::getenv(kCublasWorkspaceVariable) != nullptr);
  CHECK(std::string(std::getenv(kCublasWorkspaceVariable)) == ":4096:8");

  ::setenv(kCublasWorkspaceVariable, "", 1);
  CHECK(EnsureCublasWorkspaceConfig() == ":4096:8");
  CHECK(std::string(std::getenv(kCublasWorkspaceVariable)) == ":4096:8");

  ::setenv(kCublasWorkspaceVariable, ":16:8", 1);
  CHECK(EnsureCublasWorkspaceConfig() == ":16:8");
  CHECK(std::string(std::getenv(kCublasWorkspaceVariable)) == ":16:8");
}

}  // namespace
}  // namespace ens
