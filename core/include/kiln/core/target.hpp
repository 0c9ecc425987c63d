//===- target.hpp - where a kernel runs, how it is compiled, its stages ---===//
//
// The vocabulary the compiler and the runtime share: the target a kernel is
// compiled for, the options of a compilation, and the stages whose IR a
// compiled kernel keeps.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>

namespace kiln {

/// Where a kernel runs.
struct Target {
  enum class Kind { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  std::string arch; // "sm_80", "sm_90a"; empty for the CPU
  static Target cpu() { return {Kind::Cpu, ""}; }
  static Target cuda(std::string sm) { return {Kind::Cuda, std::move(sm)}; }
  std::string str() const { return kind == Kind::Cpu ? "cpu" : "cuda:" + arch; }
  /// The compute capability of a CUDA target as a number ("sm_90a": 90);
  /// 0 for the CPU or an arch that does not name one.
  int sm() const {
    if (kind != Kind::Cuda || arch.rfind("sm_", 0) != 0)
      return 0;
    int v = 0;
    for (std::size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i)
      v = v * 10 + (arch[i] - '0');
    return v;
  }
  /// Thread-block clusters (kiln.cluster_reduce, kiln.cluster_gather):
  /// sm_90 and newer. On the CPU they are emulated, a thread per program.
  bool has_clusters() const { return kind == Kind::Cpu || sm() >= 90; }
};

/// Compilation stages whose IR can be printed.
enum class Stage {
  Kiln,        ///< as traced, after canonicalization
  Lowered,     ///< kiln ops replaced by standard dialects (tensor/linalg/scf/arith)
  LLVMDialect, ///< MLIR's LLVM dialect
  LLVMIR,      ///< LLVM IR
  Ptx,         ///< PTX assembly (CUDA targets)
};
std::string_view to_string(Stage s);
/// Parses "kiln", "lowered", "llvm-dialect", "llvm", "ptx"; throws Error otherwise.
Stage parse_stage(std::string_view s);

struct CompileOptions {
  /// Print the IR after every pass to stderr (also: KILN_PRINT_IR_AFTER_ALL=1).
  bool print_after_all = false;
  /// Write the IR of every stage into this folder (also: KILN_DUMP_DIR).
  std::string dump_dir;
  /// LLVM optimisation level of the generated code (CPU).
  int opt_level = 2;
  /// Warps per program on CUDA targets.
  int num_warps = 4;
  /// Software-pipelining depth of loops on CUDA targets (1: off, 2: the loads
  /// of the next iteration are issued before this iteration's work).
  int num_stages = 2;
  /// On sm_90a, copy the tiles of products that are blocks of a tensor with
  /// the Tensor Memory Accelerator (TMA) where the kernel's addressing allows.
  /// A launch whose tensors TMA cannot describe (a base address or row stride
  /// not a multiple of 16 bytes) runs the same kernel compiled without it.
  bool tma = true;
  /// On sm_90a, a kernel whose product loop is fed by TMA gets a producer
  /// warp of its own that issues the copies, paced by one "empty" barrier
  /// per ring buffer, while the program's warps only compute (warp
  /// specialisation; one more warp per program). Kernels the rewrite does
  /// not apply to compile as without it.
  bool warp_specialize = false;
  /// With warp_specialize: the kernel is launched with as many programs as
  /// fit on the GPU at once, each looping over the tiles of the grid it was
  /// launched for (a persistent kernel), so that one tile's epilogue
  /// overlaps the next tile's copies.
  bool persistent = false;
  /// CUDA toolkit (for libdevice); also KILN_CUDA_PATH.
  std::string cuda_path = "/usr/local/cuda";
  /// Reuse and fill the on-disk kernel cache (CUDA targets; see KILN_CACHE_DIR,
  /// KILN_CACHE=0).
  bool use_cache = true;
};

} // namespace kiln
