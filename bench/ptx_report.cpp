//===- ptx_report.cpp - registers, spills and shared memory of library kernels ===//
//
// Compiles the library's kernels in the configurations the GPT-2 decoder and
// kiln_bench use, assembles each with `ptxas -v`, and prints one line per
// kernel: registers, spill stores/loads (bytes), dynamic shared memory and
// compile time. Comparing two builds' reports shows any register or spill
// regression of the code generator without a GPU:
//
//   kiln-ptx-report --arch sm_90a > after.txt && diff before.txt after.txt
//
//===----------------------------------------------------------------------===//
#include "kiln/kiln.hpp"
#include "kiln/ops/attention.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/softmax.hpp"
#include "kiln/runtime/tool.hpp"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include <unistd.h>

using namespace kiln;

namespace {

struct Report {
  std::string arch, ptxas;
  std::string schedule = "plain"; /// see --schedule
  std::filesystem::path dir;

  /// ptxas -v's numbers for `ptx`: registers, spill stores, spill loads.
  std::array<long, 3> assemble(const std::string &ptx, const std::string &name) {
    auto file = dir / (name + ".ptx");
    std::ofstream(file) << ptx;
    std::string cmd = ptxas + " -arch=" + arch + " -v " + file.string() + " -o " +
                      (dir / (name + ".cubin")).string() + " 2>&1";
    std::string out;
    if (FILE *p = popen(cmd.c_str(), "r")) {
      char buf[512];
      while (fgets(buf, sizeof buf, p))
        out += buf;
      if (pclose(p) != 0)
        throw Error("ptxas failed on " + file.string() + ":\n" + out);
    }
    std::smatch m;
    std::array<long, 3> r{-1, -1, -1};
    if (std::regex_search(out, m, std::regex("Used (\\d+) registers")))
      r[0] = std::stol(m[1]);
    if (std::regex_search(out, m, std::regex("(\\d+) bytes spill stores, (\\d+) bytes spill loads"))) {
      r[1] = std::stol(m[1]);
      r[2] = std::stol(m[2]);
    }
    return r;
  }

  template <class K> void add(int warps = 4, int stages = 2) { add(K{}, warps, stages); }
  template <class K> void add(const K &kernel, int warps = 4, int stages = 2) {
    CompileOptions o;
    o.num_warps = warps;
    o.num_stages = stages;
    o.use_cache = false;
    o.warp_specialize = schedule != "plain";
    o.persistent = schedule == "persistent";
    auto k = compile<K>(Target::cuda(arch), o, kernel);
    const std::string &ptx = k.ir(Stage::Ptx);
    std::string name = k.name() + "_w" + std::to_string(warps) + "_s" + std::to_string(stages) +
                       (schedule == "plain" ? "" : "_" + schedule);
    auto [regs, stores, loads] = assemble(ptx, name);
    long smem = 0;
    if (auto at = ptx.find("kiln_smem_bytes = "); at != std::string::npos)
      smem = std::stol(ptx.substr(at + 18));
    std::printf("%-62s %4ld %6ld %6ld %7ld %8.0f\n", name.c_str(), regs, stores, loads, smem,
                k.compile_seconds() * 1e3);
    std::fflush(stdout);
  }
};

template <class D> void library(Report &r) {
  using enum ops::Epilogue;
  // Memory-bound kernels.
  r.add<ops::VecAdd<D, 1024>>();
  r.add<ops::Softmax<D, 1024>>();
  r.add<ops::Softmax<D, 1024, true>>();
  r.add<ops::LayerNorm<D, 1024>>();
  r.add<ops::LayerNorm<D, 1024, true>>();
  r.add<ops::SoftmaxRows<D, 4, 1024>>();
  r.add<ops::SoftmaxWide<D, 2048>>();
  r.add<ops::LayerNormRows<D, 4, 1024>>();
  r.add<ops::Embedding<D, 256>>();
  r.add<ops::KvWrite<D, 256>>();
  r.add<ops::GatherRows<D, 256>>();
  r.add<ops::ArgmaxRows<D, 8192>>(8);
  r.add<ops::SampleRows<D, 1024>>();
  // Decode products (GPT-2 124M widths, one row and eight).
  r.add(ops::DecodeQkv<D, 8>{.rows = 1, .k = 768});
  r.add(ops::DecodeQkv<D, 4>{.rows = 8, .k = 768});
  r.add(ops::DecodeLinear<D, 4>{.rows = 1, .k = 768, .epilogue = BiasResidual});
  r.add(ops::DecodeLinear<D, 8>{.rows = 1, .k = 768, .ln = true, .epilogue = BiasGelu});
  r.add(ops::DecodeLinear<D, 4>{.rows = 1, .k = 3072, .epilogue = BiasResidual});
  r.add(ops::DecodeLinear<D, 4>{.rows = 8, .k = 3072, .epilogue = BiasResidual});
  r.add(ops::DecodeLinear<D, 8>{.rows = 1, .k = 768, .epilogue = None});
  // Few-row products (2-16 rows) in the panels nn::Linear and its fused
  // variants use for GPT-2's widths.
  r.add<ops::FewRowsLinear<D, 16, 32, 256, 3, ops::Epilogue::BiasGelu>>(4);
  r.add<ops::FewRowsLinear<D, 16, 32, 256, 3, ops::Epilogue::BiasResidual>>(4);
  r.add<ops::FewRowsLinear<D, 16, 16, 256, 2, ops::Epilogue::BiasResidual>>(2);
  // With the layernorm fused a 32x768 panel on 4 warps spills (176 bytes a
  // thread on sm_90a); 32x384 does not.
  r.add<ops::FewRowsNormLinear<D, 16, 32, 256, 3, ops::Epilogue::BiasGelu>>(4);
  r.add<ops::FewRowsNormLinear<D, 16, 32, 128, 3, ops::Epilogue::BiasGelu>>(4);
  r.add<ops::FewRowsNormLinear<D, 16, 32, 128, 3, ops::Epilogue::None>>(4);
  r.add<ops::FewRowsNormLinear<D, 16, 32, 256, 3, ops::Epilogue::None>>(4);
  r.add<ops::FewRowsNormLinear<D, 16, 16, 128, 2, ops::Epilogue::Bias>>(2);
  r.add<ops::FewRowsQkv<D, 16, 32, 128, 3>>(4);
  r.add<ops::FewRowsQkv<D, 16, 32, 256, 3, false>>(4); // after a layernorm launch
  // Tensor-core products: the decoder's prefill tiles and kiln_bench's.
  r.add<ops::Matmul<D, 64, 64, 32>>();
  r.add<ops::Matmul<D, 64, 64, 32>>(4, 3);
  r.add<ops::Matmul<D, 128, 128, 32>>(8, 3);
  r.add<ops::Matmul<D, 128, 128, 64>>(8, 3);
  r.add<ops::Matmul<D, 128, 256, 64>>(8, 3);
  r.add<ops::MatmulBiasGelu<D, 128, 256, 64>>(8, 3);
  r.add<ops::Matmul<D, 128, 192, 64>>(8, 3);
  r.add<ops::MatmulBias<D, 64, 128, 64>>(4, 3);
  r.add<ops::MatmulBiasGelu<D, 64, 128, 64>>(4, 3);
  r.add<ops::MatmulBiasResidual<D, 64, 128, 64>>(4, 3);
  r.add<ops::Matmul<D, 16, 64, 64>>();
  r.add<ops::MatmulBias<D, 128, 128, 64>>(8, 3);
  r.add<ops::MatmulBiasGelu<D, 128, 128, 64>>(8, 3);
  r.add<ops::MatmulBiasResidual<D, 128, 128, 64>>(8, 3);
  r.add<ops::MatmulBias<D, 32, 64, 64>>(4, 3);
  r.add<ops::MatmulBiasGelu<D, 32, 64, 64>>(4, 3);
  r.add<ops::MatmulBiasResidual<D, 32, 64, 64>>(4, 3);
  r.add<ops::MatmulBiasGelu<D, 64, 64, 32>>();
  r.add<ops::MatmulSplitK<D, 16, 64, 64>>();
  r.add<ops::SplitKEpilogue<D, 1024, ops::Epilogue::BiasGelu>>();
  // f32 products on TF32 tensor cores (B transposed, and as it is).
  r.add<ops::MatmulTF32<64, 256, 32, true>>(4, 4);
  r.add<ops::MatmulTF32<128, 128, 32, true>>(8, 3);
  r.add<ops::MatmulTF32<128, 256, 32, true>>(8, 3);
  r.add<ops::MatmulTF32<128, 128, 32>>(8, 3);
  // Attention.
  r.add<ops::AttentionPrefill<D, 64, 64, 64>>();
  r.add<ops::AttentionPrefill<D, 64, 64, 128>>();
  r.add<ops::AttentionPrefill<D, 128, 64, 64>>(8);
  r.add<ops::AttentionPrefill<D, 128, 64, 128>>(8);
  r.add<ops::AttentionDecode<D, 32, 64, 32>>();
  r.add<ops::AttentionDecode<D, 32, 64, 4>>(8);
  r.add<ops::AttentionDecode<D, 32, 64, 1>>();
  r.add<ops::AttentionDecode<D, 64, 64, 1>>();
  r.add<ops::AttentionDecode<D, 16, 64, 16>>(2);
  r.add<ops::AttentionDecodeCluster<D, 16, 64, 8>>(2);
  r.add<ops::AttentionDecodeCluster<D, 32, 64, 4>>(2);
}

} // namespace

int main(int argc, char **argv) {
  return tool::run("kiln-ptx-report", [&] {
    CLI::App app("Registers, spills and shared memory of kiln's library kernels (ptxas -v)");
    Report r;
    r.arch = "sm_90a";
    std::string dtype = "f16";
    app.add_option("--arch", r.arch, "CUDA architecture (sm_80, sm_90a, ...)");
    app.add_option("--dtype", dtype, "element type of the kernels")->check(CLI::IsMember({"f16", "bf16"}));
    app.add_option("--schedule", r.schedule,
                   "plain, ws (a producer warp issues the TMA copies) or persistent (ws, looping over tiles)")
        ->check(CLI::IsMember({"plain", "ws", "persistent"}));
    app.add_option("--ptxas", r.ptxas, "ptxas to assemble with (default: /usr/local/cuda/bin/ptxas, then PATH)");
    if (!tool::parse(app, argc, argv))
      return 0;
    if (r.ptxas.empty())
      r.ptxas = std::filesystem::exists("/usr/local/cuda/bin/ptxas") ? "/usr/local/cuda/bin/ptxas" : "ptxas";
    r.dir = std::filesystem::temp_directory_path() / ("kiln-ptx-report-" + std::to_string(getpid()));
    std::filesystem::create_directories(r.dir);
    std::printf("# %s, %s: kernel_warps_stages, registers, spill stores, spill loads, shared bytes, compile ms\n",
                r.arch.c_str(), dtype.c_str());
    if (dtype == "f16")
      library<f16>(r);
    else
      library<bf16>(r);
    std::filesystem::remove_all(r.dir);
    return 0;
  });
}
