//===- AtomicFile.cpp - Replace a file atomically ---------------*- C++ -*-===//
//
// POSIX implementation of AtomicFile.h: open/write/fsync/rename on a
// temporary beside the target. Every system-call failure becomes one status
// line naming the call, the file and strerror.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/checkpoint/AtomicFile.h"

#include "absl/strings/str_cat.h"

#include <vector>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
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

/// read(2) that retries on EINTR; -1 only for a real error (errno set).
ssize_t readSome(int fd, void *buffer, size_t size) {
  while (true) {
    ssize_t n = ::read(fd, buffer, size);
    if (n >= 0 || errno != EINTR)
      return n;
  }
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
    ssize_t n = readSome(fd, out.data() + done, out.size() - done);
    if (n < 0) {
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

absl::StatusOr<int> removeStaleTemporaries(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR)
      return 0;
    return errnoError("opendir", dir);
  }
  std::vector<std::string> stale;
  while (struct dirent *entry = ::readdir(d)) {
    absl::string_view name = entry->d_name;
    size_t at = name.rfind(".tmp.");
    if (at == absl::string_view::npos || at == 0)
      continue;
    absl::string_view digits = name.substr(at + 5);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != absl::string_view::npos)
      continue;
    long pid = 0;
    for (char c : digits)
      pid = pid * 10 + (c - '0');
    // A live process (or one we may not signal) may still be writing it.
    if (pid == ::getpid() ||
        (pid > 0 &&
         (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)))
      continue;
    stale.emplace_back(name);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string &name : stale) {
    std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (::unlink(path.c_str()) != 0)
      return errnoError("unlink", path);
    ++removed;
  }
  return removed;
}

absl::StatusOr<std::string> fingerprintFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errnoError("open", path);
  uint64_t hash = 0xcbf29ce484222325ull; // FNV-1a, 64 bits
  std::vector<unsigned char> buffer(1 << 20);
  while (true) {
    ssize_t n = readSome(fd, buffer.data(), buffer.size());
    if (n < 0) {
      absl::Status s = errnoError("read", path);
      ::close(fd);
      return s;
    }
    if (n == 0)
      break;
    for (ssize_t i = 0; i < n; ++i) {
      hash ^= buffer[static_cast<size_t>(i)];
      hash *= 0x100000001b3ull;
    }
  }
  ::close(fd);
  return absl::StrCat("fnv1a64:", absl::Hex(hash, absl::kZeroPad16));
}

} // namespace omni::checkpoint
