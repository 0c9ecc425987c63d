//===- File.h - reading model and tokenizer files (internal) --------------===//
//
// Every file kiln-gpt2 reads goes through here: it must be a regular file
// (a directory, FIFO or device is refused with a message, never opened for
// a blocking read), reads are positioned and checked for short counts, and
// sizes are capped before a buffer is allocated.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::gpt2 {

/// A regular file opened for positioned reads, or bytes already in memory
/// read the same way. Symbolic links are followed (HF's cache links model
/// files to blobs); what they reach must be a regular file. Errors are
/// kiln::Error naming `what` and the path.
class File {
public:
  File(const std::string &path, const std::string &what);
  /// Reads from `bytes` (which must outlive the File); `name` stands for
  /// the path in messages.
  static File memory(std::string_view bytes, const std::string &name, const std::string &what);
  ~File();
  File(const File &) = delete;
  File &operator=(const File &) = delete;

  uint64_t size() const { return size_; }
  /// Reads exactly `n` bytes at `offset`; throws if the file is shorter.
  void read(uint64_t offset, void *dst, uint64_t n) const;

  const std::string &path() const { return path_; }

private:
  File(std::string path, std::string what, std::string_view bytes)
      : path_(std::move(path)), what_(std::move(what)), bytes_(bytes), size_(bytes.size()) {}
  std::string path_, what_;
  int fd_ = -1;
  std::string_view bytes_;
  uint64_t size_ = 0;
};

/// The whole of a regular file, refused when larger than `maxBytes`.
std::string readRegularFile(const std::string &path, const std::string &what, uint64_t maxBytes);

} // namespace kiln::gpt2
