//===- temp_cache.hpp - a private kernel-cache folder for one test --------===//
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace kiln::test {

/// Points KILN_CACHE_DIR at a fresh folder for the lifetime of the object.
struct TempCache {
  std::filesystem::path dir;
  explicit TempCache(const std::string &tag)
      : dir(std::filesystem::temp_directory_path() / ("kiln-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir);
    ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  }
  ~TempCache() {
    ::unsetenv("KILN_CACHE_DIR");
    std::filesystem::remove_all(dir);
  }
};

} // namespace kiln::test
