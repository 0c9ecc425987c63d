//===- File.cpp - reading model and tokenizer files -----------------------===//
#include "File.h"

#include "kiln/core/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::gpt2 {

File::File(const std::string &path, const std::string &what) : path_(path), what_(what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is
  // checked on the descriptor, so a file swapped in between cannot slip by.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0)
    throw Error("gpt2: cannot open " + what + " " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error("gpt2: " + what + " " + path + " is " +
                (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file") + ", expected a file");
  }
  size_ = uint64_t(st.st_size);
}

File File::memory(std::string_view bytes, const std::string &name, const std::string &what) {
  return File(name, what, bytes);
}

File::~File() {
  if (fd_ >= 0)
    ::close(fd_);
}

void File::read(uint64_t offset, void *dst, uint64_t n) const {
  auto *out = static_cast<char *>(dst);
  if (fd_ < 0) {
    if (offset > size_ || n > size_ - offset)
      throw Error("gpt2: " + what_ + " " + path_ + ": cannot read " + std::to_string(n) +
                  " bytes at offset " + std::to_string(offset) + " (truncated file?)");
    std::memcpy(out, bytes_.data() + offset, n);
    return;
  }
  while (n > 0) {
    ssize_t got = ::pread(fd_, out, std::size_t(std::min<uint64_t>(n, 1 << 30)), off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      throw Error("gpt2: " + what_ + " " + path_ + ": cannot read " + std::to_string(n) +
                  " bytes at offset " + std::to_string(offset) +
                  (got < 0 ? std::string(": ") + std::strerror(errno) : " (truncated file?)"));
    out += got, offset += uint64_t(got), n -= uint64_t(got);
  }
}

std::string readRegularFile(const std::string &path, const std::string &what, uint64_t maxBytes) {
  File f(path, what);
  if (f.size() > maxBytes)
    throw Error("gpt2: " + what + " " + path + " has " + std::to_string(f.size()) +
                " bytes, more than the " + std::to_string(maxBytes) + " such a file can have");
  std::string text(f.size(), '\0');
  f.read(0, text.data(), text.size());
  return text;
}

} // namespace kiln::gpt2
