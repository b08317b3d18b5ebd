#include "common/base/cublas_workspace.h"

#include <cstdlib>

namespace ens {

std::string EnsureCublasWorkspaceConfig() {
  const char* now = std::getenv(kCublasWorkspaceVariable);
  if (now != nullptr && *now != '\0') return now;
  ::setenv(kCublasWorkspaceVariable, kCublasWorkspaceConfig, 1);
  return kCublasWorkspaceConfig;
}

}  // namespace ens
