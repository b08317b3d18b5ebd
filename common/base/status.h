// Status: the value every expected failure is returned as.
//
// A Status is either ok() or carries a code and a message that already names the place
// (file:line:column, a JSON pointer, a path). errno is turned into text only in
// Status::FromErrno. Cheap to copy; immutable once made. Thread-compatible.
// [[nodiscard]], as is StatusOr: a call whose failure truly does not matter says so with an
// explicit (void) and a comment saying why.
#pragma once

#include <string>
#include <utility>

namespace ens {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk, kInvalidArgument, kNotFound, kIOError, kCorruption, kTimeout, kInternal, kCancelled };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status Timeout(std::string msg) { return Status(Code::kTimeout, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  // An operation given up because the process was told to stop (not a failure of its own).
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  // "<context>: <strerror(err)>"; the one place errno becomes text.
  static Status FromErrno(const std::string& context, int err);
  // An input the run was given (a data file) that cannot be opened: FromErrno, except that no
  // permission (EACCES, EPERM) is InvalidArgument too, which a restart cannot fix (exit 78):
  // a run whose user may not read its data fails at once with the reason instead of retrying.
  static Status FromInputErrno(const std::string& context, int err);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "ok" or "<code name>: <message>".
  std::string ToString() const;

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}        // NOLINT(runtime/explicit)
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT(runtime/explicit)
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T* operator->() { return &value_; }
  T& operator*() { return value_; }

 private:
  Status status_;
  T value_{};
};

}  // namespace ens
