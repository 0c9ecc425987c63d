//===- temp_dir.hpp - a fresh folder for one test --------------------------===//
#pragma once

#include <filesystem>
#include <string>
#include <unistd.h>

namespace kiln::test {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string &tag)
      : path((std::filesystem::temp_directory_path() / ("kiln-" + tag + "-" + std::to_string(::getpid()))).string()) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

} // namespace kiln::test
