#include "common/state/journal_follower.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "common/base/fd_io.h"

namespace ens {

void JournalFollower::Reset() {
  offset_ = 0;
  lines_ = 0;
  progress_ = RunProgress{};
}

Status JournalFollower::Update() {
  FileCheck check = check_;
  check.max_bytes = UINT64_MAX;  // a journal grows; what is read is only what is new
  StatusOr<int> opened = OpenNoFollow(path_, check);
  if (!opened.ok()) {
    if (opened.status().code() == Status::Code::kNotFound) return Status::NotFound(path_ + ": no journal");
    return opened.status();
  }
  const int fd = *opened;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("stat " + path_, err);
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (st.st_dev != dev_ || st.st_ino != ino_ || size < offset_) {  // another file, or cut short
    Reset();
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  std::string text(size - offset_, '\0');
  Status read = text.empty() ? Status::Ok() : PreadFull(fd, text.data(), text.size(), offset_, path_);
  ::close(fd);
  if (!read.ok()) return read;
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    nlohmann::json j = nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos),
                                             text.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_string())
      return Status::Corruption(path_ + ":" + std::to_string(lines_ + 1) + ": not a journal record");
    progress_.Apply(j);
    ++lines_;
    offset_ += nl + 1 - pos;
  }
  return Status::Ok();
}

}  // namespace ens
