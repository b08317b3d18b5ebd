#include "common/base/status.h"

#include <cstring>

namespace ens {

Status Status::FromErrno(const std::string& context, int err) {
  Code code = (err == ENOENT) ? Code::kNotFound : Code::kIOError;
  return Status(code, context + ": " + std::strerror(err));
}

Status Status::FromInputErrno(const std::string& context, int err) {
  if (err == EACCES || err == EPERM)
    return Status(Code::kInvalidArgument, context + ": " + std::strerror(err) + " (the run's user may not read it)");
  return FromErrno(context, err);
}

std::string Status::ToString() const {
  const char* name = "ok";
  switch (code_) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: name = "invalid argument"; break;
    case Code::kNotFound: name = "not found"; break;
    case Code::kIOError: name = "I/O error"; break;
    case Code::kCorruption: name = "corruption"; break;
    case Code::kTimeout: name = "timeout"; break;
    case Code::kInternal: name = "internal error"; break;
    case Code::kCancelled: name = "cancelled"; break;
  }
  return std::string(name) + ": " + message_;
}

}  // namespace ens
