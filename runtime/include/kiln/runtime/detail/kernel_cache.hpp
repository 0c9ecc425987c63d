//===- kernel_cache.hpp - content-addressed on-disk cache of compiled kernels ===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include <map>
#include <optional>
#include <string>

namespace kiln {

/// Compiled stages of one kernel, stored under a key that hashes everything
/// the result depends on (kernel IR, options, target, compiler version).
/// Entries are written to a private temporary folder and renamed into place,
/// so concurrent processes never see a partial entry.
class KernelCache {
public:
  /// The folder in use: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
  static std::string directory();
  /// False when disabled with KILN_CACHE=0.
  static bool enabled();
  /// Hex SHA-256 of the parts, separated so that no two part lists collide.
  static std::string key(std::initializer_list<std::string_view> parts);

  /// An entry: the IR of every stage, and the code to run (PTX for a GPU,
  /// an object file for the host).
  struct Entry {
    std::map<Stage, std::string> stages;
    std::string object; ///< empty for GPU entries, whose code is the PTX stage
  };
  /// The entry under `key`, if it holds PTX or an object file.
  static std::optional<Entry> load(const std::string &key);
  /// Best effort: a cache that cannot be written is skipped, never an error.
  static void store(const std::string &key, const Entry &entry);
  /// Removes the entry under `key` (one found damaged), best effort.
  static void discard(const std::string &key);
};

} // namespace kiln
