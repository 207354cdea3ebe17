//===- AtomicFile.cpp - Replace a file atomically ---------------*- C++ -*-===//
//
// POSIX implementation of AtomicFile.h: open/write/fsync/rename on a
// temporary beside the target. Every system-call failure becomes one status
// line naming the call, the file and strerror.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/checkpoint/AtomicFile.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::checkpoint {
namespace {

absl::Status errnoError(absl::string_view call, absl::string_view path) {
  int err = errno;
  std::string message =
      absl::StrCat(path, ": ", call, " failed: ", std::strerror(err));
  if (err == ENOENT)
    return absl::NotFoundError(message);
  return absl::InternalError(message);
}

/// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
bool writeAll(int fd, absl::string_view bytes) {
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

} // namespace

absl::Status writeFileAtomically(const std::string &path,
                                 absl::string_view bytes) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return errnoError("open", tmp);
  absl::Status status;
  if (!writeAll(fd, bytes))
    status = errnoError("write", tmp);
  else if (::fsync(fd) != 0)
    status = errnoError("fsync", tmp);
  if (::close(fd) != 0 && status.ok())
    status = errnoError("close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    status = errnoError("rename", path);
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename durable. Failure to open the folder (e.g. no read
  // permission) is not an error: the data itself is already on disk.
  std::string folder = folderOf(path);
  int dirFd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    if (::fsync(dirFd) != 0)
      status = errnoError("fsync", folder);
    ::close(dirFd);
  }
  return status;
}

absl::StatusOr<std::string> readWholeFile(const std::string &path,
                                          uint64_t maxBytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errnoError("open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = errnoError("fstat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a regular file"));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > maxBytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": file is ", size, " bytes, expected at most ", maxBytes));
  }
  std::string out(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      absl::Status s = errnoError("read", path);
      ::close(fd);
      return s;
    }
    if (n == 0)
      break; // the file shrank under us; parse what we got
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  ::close(fd);
  return out;
}

} // namespace omni::checkpoint
