// FdIo: whole reads and writes on blocking descriptors (pipes, files), retried across EINTR
// and short transfers. Errors name `what` (a path, "predict stream") and the errno text.
// Thread-safe (no state).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace ens {

Status WriteFull(int fd, const void* data, size_t n, const std::string& what);
// Reads exactly n bytes. An end of input before the first byte sets *eof (when eof is not
// null) and returns ok; one after it is an error ("ended inside ...").
Status ReadFull(int fd, void* data, size_t n, const std::string& what, bool* eof = nullptr);

}  // namespace ens
