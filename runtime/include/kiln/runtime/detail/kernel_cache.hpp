//===- kernel_cache.hpp - content-addressed on-disk cache of compiled kernels ===//
#pragma once

#include "kiln/runtime/kernel.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// Compiled stages of one kernel, stored under a key that hashes everything
/// the result depends on (kernel IR, options, target, compiler version).
///
/// An entry is the folder `<directory()>/<key>` holding one file per stage
/// (`kiln.txt`, `lowered.txt`, `llvm-dialect.txt`, `llvm.txt`, `ptx.txt`), the
/// host's object code (`host.o`), and a manifest (`manifest`) that lists every
/// other file with its size and SHA-256 and names the key it belongs to:
///
///     kiln-cache-entry 1
///     key <64 hex digits>
///     file <name> <size in bytes> <64 hex digits of SHA-256>   (one per file, by name)
///     end <64 hex digits of SHA-256 of every byte above this line>
///
/// Every line ends with '\n'. The host's object code is linked into the
/// process and run, so a damaged entry must never be used: an entry is only
/// used when its manifest parses, lists exactly the files of the folder, and
/// every file is a regular file (never followed through a symlink) with the
/// recorded size and digest. Anything else is a miss, and the entry that
/// the caller then compiles replaces the damaged one.
///
/// Entries are written to a private temporary folder, manifest last, and
/// renamed into place, so concurrent processes never see a partial entry.
/// The checksums catch damage, not forgery: whoever may write the cache
/// folder may write a matching manifest too.
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
  /// The entry under `key`, if it is intact (see above) and holds PTX or an
  /// object file.
  static std::optional<Entry> load(const std::string &key);
  /// Publishes `entry` under `key`, replacing an entry there that is not
  /// intact; an intact one (another process's) is kept. Best effort: a cache
  /// that cannot be written is skipped, never an error.
  static void store(const std::string &key, const Entry &entry);
  /// Removes the entry under `key` (one found damaged), best effort.
  static void discard(const std::string &key);

  /// The first line of every manifest. Changing the layout of an entry
  /// changes this line, which makes every older entry a miss.
  static constexpr std::string_view kManifestFormat = "kiln-cache-entry 1";
  /// The name of the manifest in an entry's folder.
  static constexpr std::string_view kManifestName = "manifest";
  /// The largest file an entry may hold; larger entries are not stored, and
  /// larger files are not read.
  static constexpr std::uint64_t kMaxFileBytes = 256ull << 20;
  /// The largest manifest that is read.
  static constexpr std::uint64_t kMaxManifestBytes = 64u << 10;

  /// The files `entry` is stored as, by name: one per stage and `host.o`
  /// when it has an object file.
  static std::map<std::string, std::string> files_of(const Entry &entry);
  /// The manifest of an entry under `key` made of `files` (by name).
  static std::string make_manifest(std::string_view key,
                                   const std::map<std::string, std::string> &files);
  /// `lines` (the manifest above its last line, each line ending in '\n')
  /// followed by the last line, which seals them. A fuzz target can seal
  /// its input to reach the checks past the seal.
  static std::string seal_manifest(std::string_view lines);
  /// One file as listed in a manifest.
  struct ManifestFile {
    std::uint64_t size = 0;
    std::string sha256; ///< 64 lowercase hex digits
  };
  /// The files listed by `manifest` (by name) if it is a well-formed
  /// manifest of the current format for `key`, whose final digest matches
  /// and which lists only file names an entry may have, each at most
  /// kMaxFileBytes, in increasing order. Touches no file.
  static std::optional<std::map<std::string, ManifestFile>>
  parse_manifest(std::string_view key, std::string_view manifest);
  /// The entry made of `files` (name -> bytes, the manifest not among them)
  /// if `manifest` is valid for `key` (see parse_manifest), `files` holds
  /// exactly the files it lists with their sizes and digests, and the entry
  /// holds PTX or an object file. Touches no file and trusts none of its
  /// inputs: load() reads an entry's folder and hands its bytes here, and a
  /// fuzz target may call it with arbitrary bytes.
  static std::optional<Entry> parse_entry(std::string_view key, std::string_view manifest,
                                          std::map<std::string, std::string> files);
};

} // namespace kiln
