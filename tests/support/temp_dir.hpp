//===- temp_dir.hpp - a fresh folder for one test --------------------------===//
#pragma once

#include <cstdlib>
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

/// Sets an environment variable for one scope, then restores it.
struct ScopedEnv {
  std::string name, saved;
  bool had;
  ScopedEnv(std::string n, const std::string &value) : name(std::move(n)) {
    const char *old = std::getenv(name.c_str());
    had = old != nullptr;
    saved = had ? old : "";
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had)
      ::setenv(name.c_str(), saved.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

} // namespace kiln::test
