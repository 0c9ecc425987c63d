//===- test_ptx.cpp - every library kernel assembles with ptxas -----------===//
#include <doctest/doctest.h>

#include "kiln/ops/attention.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/softmax.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

using namespace kiln;

namespace {
/// Assembles `ptx` with ptxas for `arch`; returns ptxas's exit status.
int ptxas(const std::string &ptx, const std::string &arch, const std::string &name) {
  std::string ptxas_path = KILN_PTXAS;
  REQUIRE_MESSAGE(!ptxas_path.empty(), "ptxas not found: install the CUDA toolkit at /usr/local/cuda");
  auto dir = std::filesystem::temp_directory_path() / "kiln-ptx-test";
  std::filesystem::create_directories(dir);
  auto file = dir / (name + "." + arch + ".ptx");
  std::ofstream(file) << ptx;
  std::string cmd = ptxas_path + " -arch=" + arch + " " + file.string() + " -o " +
                    (dir / (name + "." + arch + ".cubin")).string();
  return std::system(cmd.c_str());
}

/// Bytes of register spills ptxas reports for `ptx` (sm_90a), or -1 if it
/// reported none at all.
int spill_stores(const std::string &ptx, const std::string &name) {
  auto dir = std::filesystem::temp_directory_path() / "kiln-ptx-test";
  std::filesystem::create_directories(dir);
  auto file = dir / (name + ".spills.ptx");
  std::ofstream(file) << ptx;
  std::string cmd = std::string(KILN_PTXAS) + " -arch=sm_90a -v " + file.string() + " -o " +
                    (dir / (name + ".spills.cubin")).string() + " 2>&1";
  std::string out;
  if (FILE *p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p))
      out += buf;
    pclose(p);
  }
  auto at = out.find(" bytes spill stores");
  if (at == std::string::npos)
    return -1;
  auto begin = out.rfind(' ', at - 1);
  return std::stoi(out.substr(begin + 1, at - begin - 1));
}

/// Compiles `kernel` (an object: its configuration is data) for sm_80 and
/// sm_90a, checks the PTX with ptxas, and returns the sm_90a PTX.
template <class K>
std::string check_object(const K &kernel, const char *must_contain = nullptr, CompileOptions options = {}) {
  std::string last;
  for (const char *arch : {"sm_80", "sm_90a"}) {
    auto k = compile<K>(Target::cuda(arch), options, kernel);
    const std::string &ptx = k.ir(Stage::Ptx);
    CAPTURE(arch);
    CAPTURE(k.name());
    MESSAGE(k.name() << " for " << std::string(arch) << ": " << k.compile_seconds() * 1e3 << " ms"
                     << std::string(k.from_cache() ? " (cache hit)" : ""));
    CHECK(ptx.find(".entry " + k.name()) != std::string::npos);
    CHECK(ptx.find(std::string(".target ") + arch) != std::string::npos);
    CHECK(ptxas(ptx, arch, k.name()) == 0);
    if (must_contain)
      CHECK(ptx.find(must_contain) != std::string::npos);
    last = ptx;
  }
  return last;
}

template <class K>
std::string check_kernel(const char *must_contain = nullptr, CompileOptions options = {}) {
  return check_object(K{}, must_contain, options);
}

/// The group counts of every cp.async.wait_group in `ptx`, in order.
std::vector<int> wait_groups(const std::string &ptx) {
  std::vector<int> out;
  const std::string key = "cp.async.wait_group";
  for (auto at = ptx.find(key); at != std::string::npos; at = ptx.find(key, at + 1))
    out.push_back(std::stoi(ptx.substr(at + key.size())));
  return out;
}

/// The dynamic shared memory a kernel declares (see kiln_smem_bytes).
long shared_bytes(const std::string &ptx) {
  auto at = ptx.find("kiln_smem_bytes = ");
  return at == std::string::npos ? 0 : std::stol(ptx.substr(at + 18));
}
} // namespace

TEST_CASE("vector add") { check_kernel<ops::VecAdd<f16, 1024>>(); }
TEST_CASE("softmax") {
  // The online sweeps keep their 16-byte accesses (whether a row takes them
  // is decided at run time by its alignment, which the sweep's start gives).
  std::string online = check_kernel<ops::Softmax<f16, 1024>>("ld.global.v4.b32");
  CHECK(online.find("st.global.v4.b32") != std::string::npos);
  check_kernel<ops::Softmax<f32, 512, true>>();
  // Short rows several at a time: 16-byte loads and stores, and no spills.
  std::string rows = check_kernel<ops::SoftmaxRows<f16, 4, 1024>>("ld.global.v4.b32");
  CHECK(rows.find("st.global.v4.b32") != std::string::npos);
  CHECK(spill_stores(rows, "softmax_rows") == 0);
  // Wide rows a row at a time: the same sweeps inside the loop over rows
  // (8 warps, as benchmarked: 8 columns a thread).
  CompileOptions eight;
  eight.num_warps = 8;
  std::string wide = check_kernel<ops::SoftmaxWide<f16, 2048>>("ld.global.v4.b32", eight);
  CHECK(wide.find("st.global.v4.b32") != std::string::npos);
  CHECK(spill_stores(wide, "softmax_wide") == 0);
  // The exponentials are base 2 on the special-function unit: ex2.approx,
  // not libdevice's accurate expf (which rounds with fma.rm before its ex2).
  for (const std::string *ptx : {&online, &rows, &wide}) {
    CHECK(ptx->find("ex2.approx") != std::string::npos);
    CHECK(ptx->find("fma.rm.f32") == std::string::npos);
  }
}
TEST_CASE("softmax over a thread-block cluster") {
  // A 50257-wide f16 row over 4 programs of 16 warps (16384 columns each,
  // 32 a thread): clusters of 4
  // (.reqnctapercluster, and the size the launcher checks), 16-byte
  // accesses, the parts' maxima and sums exchanged together through
  // distributed shared memory between two cluster barriers, and no spills.
  CompileOptions sixteen;
  sixteen.num_warps = 16;
  auto k = compile<ops::SoftmaxCluster<f16, 16384, 4>>(Target::cuda("sm_90a"), sixteen);
  const std::string &ptx = k.ir(Stage::Ptx);
  CHECK(ptxas(ptx, "sm_90a", k.name()) == 0);
  CHECK(ptx.find(".reqnctapercluster 4, 1, 1") != std::string::npos);
  CHECK(ptx.find("kiln_cluster_size = 4") != std::string::npos);
  CHECK(ptx.find("ld.global.v4.b32") != std::string::npos);
  CHECK(ptx.find("st.global.v4.b32") != std::string::npos);
  auto count = [&](const std::string &what) {
    std::size_t n = 0;
    for (std::size_t at = ptx.find(what); at != std::string::npos; at = ptx.find(what, at + 1))
      ++n;
    return n;
  };
  CHECK(count("barrier.cluster.arrive.release.aligned") == 2); // one exchange of (max, sum)
  CHECK(count("barrier.cluster.wait.acquire.aligned") == 2);
  CHECK(count("mapa.shared::cluster.u32") >= 4);
  CHECK(count("ld.shared::cluster.f32") == 8);
  CHECK(spill_stores(ptx, "softmax_cluster") == 0);
  // Clusters need sm_90.
  using Small = ops::SoftmaxCluster<f16, 1024, 2>;
  CHECK_THROWS_WITH_AS(compile<Small>(Target::cuda("sm_80")),
                       doctest::Contains("thread-block clusters (sm_90 or newer)"), Error);
}
TEST_CASE("layernorm") {
  check_kernel<ops::LayerNorm<f16, 1024>>();
  check_kernel<ops::LayerNorm<f16, 1024, true>>();
  std::string rows = check_kernel<ops::LayerNormRows<f16, 4, 1024>>("ld.global.v4.b32");
  CHECK(spill_stores(rows, "layernorm_rows") == 0);
}
TEST_CASE("matmul") {
  // f16 dot runs on tensor cores; f32 uses the FMA path.
  check_kernel<ops::Matmul<f16, 64, 64, 32>>("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
  check_kernel<ops::Matmul<bf16, 64, 64, 32>>("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
  check_kernel<ops::MatmulBiasGelu<f16, 64, 64, 32>>("mma.sync.aligned.m16n8k16");
  // Fragments come from swizzled shared memory through ldmatrix (B transposed).
  check_kernel<ops::Matmul<f16, 64, 64, 32>>("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16");
  check_kernel<ops::Matmul<f16, 64, 64, 32>>("ldmatrix.sync.aligned.m8n8.x4.shared.b16");
  check_kernel<ops::Matmul<f32, 32, 32, 16>>("fma.rn.f32");
}
TEST_CASE("GPT-2 kernels") {
  check_kernel<ops::MatmulBias<f16, 64, 64, 32>>("mma.sync.aligned.m16n8k16");
  check_kernel<ops::MatmulBiasResidual<f16, 16, 64, 64>>("mma.sync.aligned.m16n8k16");
  check_kernel<ops::MatmulBiasResidual<f16, 32, 32, 32>>("mma.sync.aligned.m16n8k16");
  // Prefill attention: wgmma on sm_90a (see the attention test below).
  check_kernel<ops::AttentionPrefill<f16, 64, 64, 64>>();
  check_kernel<ops::AttentionPrefill<f16, 64, 64, 64, /*CAUSAL=*/false>>();
  // The merge: one atomic per program between GPU-scope fences.
  auto attn = check_kernel<ops::AttentionDecode<f16, 32, 64, 32>>("atom.global.add.u32");
  CHECK(attn.find("fence.acq_rel.gpu") != std::string::npos);
  // A head a program: no atomic, no fence.
  auto direct = check_kernel<ops::AttentionDecode<f16, 32, 64, 1>>();
  CHECK(direct.find("atom.") == std::string::npos);
  CHECK(direct.find("fence.acq_rel") == std::string::npos);
  // Split over a cluster of 4: the running max, sum and output of each
  // program in one exchange (two cluster barriers), no atomic, no fence.
  CompileOptions two;
  two.num_warps = 2;
  auto clustered = compile<ops::AttentionDecodeCluster<f16, 16, 64, 4>>(Target::cuda("sm_90a"), two);
  const std::string &cptx = clustered.ir(Stage::Ptx);
  CHECK(ptxas(cptx, "sm_90a", clustered.name()) == 0);
  CHECK(cptx.find(".reqnctapercluster 4, 1, 1") != std::string::npos);
  std::size_t barriers = 0;
  for (std::size_t at = cptx.find("barrier.cluster.arrive"); at != std::string::npos;
       at = cptx.find("barrier.cluster.arrive", at + 1))
    ++barriers;
  CHECK(barriers == 2);
  CHECK(cptx.find("ld.shared::cluster.f32") != std::string::npos);
  CHECK(cptx.find("atom.") == std::string::npos);
  CHECK(cptx.find("fence.acq_rel") == std::string::npos);
  CHECK(spill_stores(cptx, clustered.name()) == 0);
  // The positions and the earlier keys are read before the wait
  // on the QKV projection; the query after it.
  for (const std::string &ptx : {attn, direct, cptx}) {
    auto wait = ptx.find("griddepcontrol.wait");
    REQUIRE(wait != std::string::npos);
    CHECK(ptx.find("ld.global") < wait);
    CHECK(ptx.find("ld.global.v4", wait) != std::string::npos);
  }
  // Keys in registers: every 16-byte load of a program's keys and values
  // (BN x D halves each, over its threads) is issued before the wait; no
  // spills at the sizes GPT-2's decode steps run.
  auto resident = [&]<class K>(int warps) {
    CompileOptions options;
    options.num_warps = warps;
    auto k = compile<K>(Target::cuda("sm_90a"), options);
    const std::string &ptx = k.ir(Stage::Ptx);
    CAPTURE(k.name());
    CHECK(ptxas(ptx, "sm_90a", k.name()) == 0);
    CHECK(spill_stores(ptx, k.name()) == 0);
    auto wait = ptx.find("griddepcontrol.wait");
    REQUIRE(wait != std::string::npos);
    int before = 0;
    for (auto at = ptx.find("ld.global.v4"); at < wait; at = ptx.find("ld.global.v4", at + 1))
      ++before;
    CHECK(before == 2 * K::BN * K::D * 2 / (warps * 32 * 16));
    CHECK(ptx.find("ex2.approx") != std::string::npos);
    return ptx;
  };
  resident.template operator()<ops::AttentionDecodeResident<f16, 128, 64, 1>>(4);
  resident.template operator()<ops::AttentionDecodeResident<f16, 256, 64, 1>>(8);
  auto residentCluster = resident.template operator()<ops::AttentionDecodeResident<f16, 64, 64, 4>>(2);
  CHECK(residentCluster.find(".reqnctapercluster 4, 1, 1") != std::string::npos);
  check_kernel<ops::MatmulSplitK<f16, 16, 64, 64>>("mma.sync.aligned.m16n8k16");
  check_kernel<ops::SplitKEpilogue<f16, 1024, ops::Epilogue::BiasGelu>>();
  // The one-launch split-K product: tensor cores, one atomic per program;
  // on sm_90a it starts by letting the next kernel launch and waiting on
  // the previous one (programmatic dependent launch), which sm_80 lacks.
  using SplitK = ops::SplitKLinear<f16, 16, 64, 64, ops::Epilogue::BiasResidual>;
  auto splitK = check_kernel<SplitK>("mma.sync.aligned.m16n8k16");
  CHECK(splitK.find("atom.global.add.u32") != std::string::npos);
  CHECK(splitK.find("griddepcontrol.launch_dependents") < splitK.find("griddepcontrol.wait"));
  CHECK(splitK.find("griddepcontrol.wait") != std::string::npos);
  CHECK(compile<SplitK>(Target::cuda("sm_80")).ir(Stage::Ptx).find("griddepcontrol") == std::string::npos);
  // The few-row product: the weight panel is the 16-row side of the mma,
  // the rows of the batch its 8-wide side; every weight load is issued
  // before the wait on the previous kernel.
  using Few = ops::FewRowsLinear<f16, 16, 32, 128, 2, ops::Epilogue::BiasGelu>;
  auto few = check_kernel<Few>("mma.sync.aligned.m16n8k16");
  CHECK(few.find("atom.global.add.u32") != std::string::npos);
  CHECK(few.find("ld.global.v4") < few.find("griddepcontrol.wait"));
  // With the layernorm fused (and, for QKV, the cache write).
  check_kernel<ops::FewRowsNormLinear<f16, 16, 32, 256, 3, ops::Epilogue::BiasGelu>>("mma.sync.aligned.m16n8k16");
  auto fewQkv = check_kernel<ops::FewRowsQkv<f16, 16, 32, 256, 3>>("mma.sync.aligned.m16n8k16");
  CHECK(fewQkv.find("ld.global.v4") < fewQkv.find("griddepcontrol.wait"));
  // Without the layernorm (it ran as its own launch): the panel of the plain product.
  auto plainQkv = check_kernel<ops::FewRowsQkv<f16, 16, 32, 256, 3, false>>("mma.sync.aligned.m16n8k16");
  CHECK(plainQkv.find("ld.global.v4") < plainQkv.find("griddepcontrol.wait"));
  // A decode step's first kernel is an ordinary launch: it starts once the
  // previous step has completed, so every later kernel of the step may read
  // what that step wrote (the positions, the cache) before it waits.
  auto embed = check_kernel<ops::Embedding<f16, 256>>();
  CHECK(embed.find("griddepcontrol.launch_dependents") != std::string::npos);
  CHECK(embed.find("griddepcontrol.wait") == std::string::npos);
  CHECK(embed.find("kiln_dependent_launch") == std::string::npos);
  check_kernel<ops::KvWrite<bf16, 256>>();
  check_kernel<ops::GatherRows<f16, 256>>();
  // bf16 models use the same kernels.
  check_kernel<ops::MatmulSplitK<bf16, 16, 64, 64>>("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
  CHECK(check_kernel<ops::AttentionPrefill<bf16, 64, 64, 64>>().find(
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") != std::string::npos);
  CHECK(compile<ops::AttentionPrefill<bf16, 64, 64, 64>>(Target::cuda("sm_80"))
            .ir(Stage::Ptx)
            .find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
  check_kernel<ops::SampleRows<bf16, 1024>>();
  // Row argmax: (value, index) pairs through warp shuffles.
  CHECK(check_kernel<ops::ArgmaxRows<f16, 1024>>("shfl.sync.bfly").find("ld.global.v4.b32") !=
        std::string::npos); // logits in 16-byte loads where aligned
  CompileOptions wide; // the model's: the whole vocabulary in one sweep
  wide.num_warps = 32;
  check_kernel<ops::ArgmaxRows<f16, 65536>>("shfl.sync.bfly", wide);
  check_kernel<ops::SampleRows<f16, 1024>>("shfl.sync.bfly");
}

TEST_CASE("decode linear layers stream their weights with 16-byte loads") {
  using ops::Epilogue;
  // GPT-2 124M shapes: batch 1 and up to 8 rows; the final layernorm and
  // the tied head in one kernel.
  check_object(ops::DecodeQkv<f16, 8, 256>{.rows = 1, .k = 768}, "ld.global.v4");
  check_object(ops::DecodeLinear<f16, 8, 256>{.rows = 1, .k = 768, .ln = true, .epilogue = Epilogue::BiasGelu}, "ld.global.v4");
  check_object(ops::DecodeLinear<f16, 4, 256>{.rows = 1, .k = 3072, .epilogue = Epilogue::BiasResidual}, "ld.global.v4");
  check_object(ops::DecodeLinear<bf16, 4, 256>{.rows = 8, .k = 768, .ln = true, .epilogue = Epilogue::None}, "ld.global.v4");
  check_object(ops::DecodeLinear<f16, 4, 256>{.rows = 8, .k = 3072, .epilogue = Epilogue::BiasResidual}, "ld.global.v4");
}

TEST_CASE("decode layernorm products reduce once; the QKV product reads the positions before it waits") {
  using ops::Epilogue;
  auto count = [](const std::string &ptx, const std::string &what) {
    int n = 0;
    for (auto at = ptx.find(what); at != std::string::npos; at = ptx.find(what, at + 1))
      ++n;
    return n;
  };
  // The layernorm is folded into the product: the statistics, the row sums
  // and the sums over w g and w b share one exchange between the warps (a
  // barrier after the partials are stored, one after they are read back),
  // where normalising first took two.
  auto qkv = check_object(ops::DecodeQkv<f16, 8, 256>{.rows = 1, .k = 768});
  for (const std::string &ptx :
       {qkv, check_object(ops::DecodeLinear<f16, 8, 256>{.rows = 1, .k = 768, .ln = true, .epilogue = Epilogue::BiasGelu}),
        check_object(ops::DecodeQkv<f16, 4, 256>{.rows = 8, .k = 768}),
        check_object(ops::DecodeLinear<bf16, 4, 256>{.rows = 2, .k = 1024, .ln = true, .epilogue = Epilogue::None})})
    CHECK(count(ptx, "bar.sync") == 2);
  // The position (a 32-bit scalar the previous step wrote) is loaded before
  // griddepcontrol.wait; the activations (16-byte loads) after it.
  auto wait = qkv.find("griddepcontrol.wait");
  REQUIRE(wait != std::string::npos);
  auto pos = qkv.find("ld.global.b32");
  if (pos == std::string::npos)
    pos = qkv.find("ld.global.u32");
  CHECK(pos < wait);
}

TEST_CASE("decode and few-row products bring a later kernel's weights into L2 before they wait") {
  using ops::Epilogue;
  // prefetch_share: predicated L2 prefetches, issued after the program's own
  // weight loads and before griddepcontrol.wait, so they overlap the
  // previous kernel's tail like the weight loads do.
  for (const std::string &ptx :
       {check_object(ops::DecodeLinear<f16, 4, 256>{.rows = 1, .k = 3072, .epilogue = Epilogue::BiasResidual},
            "prefetch.global.L2"),
        check_object(ops::DecodeQkv<f16, 8, 256>{.rows = 1, .k = 768}, "prefetch.global.L2"),
        check_kernel<ops::FewRowsLinear<f16, 16, 32, 256, 3, ops::Epilogue::BiasResidual>>("prefetch.global.L2"),
        check_kernel<ops::FewRowsQkv<f16, 16, 32, 256, 3, false>>("prefetch.global.L2")}) {
    auto prefetch = ptx.find("prefetch.global.L2"), wait = ptx.find("griddepcontrol.wait");
    auto load = ptx.find("ld.global.v4");
    REQUIRE(wait != std::string::npos);
    CHECK(load < prefetch);
    CHECK(prefetch < wait);
  }
}

TEST_CASE("decode products contract into fma and stay within the register file") {
  using ops::Epilogue;
  auto one = check_object(ops::DecodeLinear<f16, 4, 256>{.rows = 1, .k = 3072, .epilogue = Epilogue::BiasResidual},
      "fma.rn.f32");
  CHECK(spill_stores(one, "decode_mlp1") == 0);
  // Eight rows of twelve chunks: 96 activation loads. With a branch to an
  // element-load path after each, ptxas fell to 32 registers and 14 KB of
  // spills per thread; past the first 48 groups the slow path is in line.
  auto eight = check_object(ops::DecodeLinear<f16, 4, 256>{.rows = 8, .k = 3072, .epilogue = Epilogue::BiasResidual});
  int spills = spill_stores(eight, "decode_mlp8");
  MESSAGE("8-row MLP-down product: " << spills << " bytes of spill stores");
  CHECK(spills >= 0);
  CHECK(spills < 1024);
}

TEST_CASE("untuned one-row layernorm products of every GPT-2 width stay within the register file") {
  // ops::decode_columns picks 8 columns a program where they fit and 4
  // elsewhere; at 8, GPT-2 1.5B's 1600-wide products spilled 276 bytes a
  // thread. Each pick for the MLP's up product and QKV, f16 at 124M to 1.5B
  // and f32 at 124M, is compiled for sm_90a and must not spill.
  using ops::Epilogue;
  static_assert(ops::decode_columns<f16>(1, 768, 256, true, 8) == 8, "GPT-2 124M keeps 8 columns");
  static_assert(ops::decode_columns<f16>(1, 1600, 256, true, 8) == 4, "GPT-2 1.5B takes 4");
  static_assert(ops::decode_columns<f16>(2, 1600, 256, true, 4) == 4, "never fewer than 4");
  auto check = [&]<class D>(int K) {
    int columns = ops::decode_columns<D>(1, K, 256, true, 8);
    CAPTURE(K);
    CAPTURE(columns);
    ops::with_decode_columns(columns, [&]<int BN>() {
      auto up = compile(Target::cuda("sm_90a"), {},
                        ops::DecodeLinear<D, BN>{.rows = 1, .k = K, .ln = true, .epilogue = Epilogue::BiasGelu});
      CHECK(spill_stores(up.ir(Stage::Ptx), up.name()) == 0);
      auto qkv = compile(Target::cuda("sm_90a"), {}, ops::DecodeQkv<D, BN>{.rows = 1, .k = K});
      CHECK(spill_stores(qkv.ir(Stage::Ptx), qkv.name()) == 0);
    });
  };
  for (int K : {768, 1024, 1280, 1600})
    check.template operator()<f16>(K);
  check.template operator()<f32>(768);
}

TEST_CASE("prefill attention keeps its softmax statistics in registers") {
  // Row maxima and sums stay in the rows of the tensor-core accumulator, the
  // output accumulator is carried in its layout, and k is read in place
  // through trans: no spills, and few barriers (with the statistics
  // replicated in every thread it needed 27 barriers, 96 exponentials and
  // 1.3 KB of spills per thread).
  std::string ptx = check_kernel<ops::AttentionPrefill<f16, 64, 64, 64>>("shfl.sync.bfly");
  CHECK(spill_stores(ptx, "attention_prefill") == 0);
  auto count = [&](const std::string &what) {
    int n = 0;
    for (auto at = ptx.find(what); at != std::string::npos; at = ptx.find(what, at + 1))
      ++n;
    return n;
  };
  MESSAGE("AttentionPrefill: " << count("bar.sync") << " barriers, " << count("ex2.approx")
                               << " exponentials");
  CHECK(count("bar.sync") <= 8);
  // Two loops (key blocks below the diagonal, unmasked, then the diagonal's),
  // each with 32 probabilities and 2 rescales per thread, every one a single
  // ex2 (exp2 with the scale folded in: no expf range reduction, fma.rm).
  CHECK(count("ex2.approx") <= 2 * 34);
  CHECK(count("fma.rm.f32") == 0);
  // sm_90a: both products on wgmma, S = Q K^T with Q copied once into shared
  // memory before the loops and K read in place, O += P V with P from
  // registers (the scores' accumulator) and V read in place.
  CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") != std::string::npos);
  CHECK(ptx.find("}, {%r") != std::string::npos); // an A fragment in registers
  CHECK(ptx.find("mma.sync") == std::string::npos);
  // The scores' products start from no accumulator (scale-d = 0) instead of
  // zeroed registers; P V accumulates onto the rescaled output.
  CHECK(ptx.find("setp.ne.b32 p, 0, 0;") != std::string::npos);
  // sm_80: mma.sync, V through ldmatrix.trans (not K, read as is).
  auto ampere = compile<ops::AttentionPrefill<f16, 64, 64, 64>>(Target::cuda("sm_80"));
  CHECK(ampere.ir(Stage::Ptx).find("ldmatrix.sync.aligned.m8n8.x4.trans") != std::string::npos);
  CHECK(ampere.ir(Stage::Ptx).find("mma.sync.aligned.m16n8k16") != std::string::npos);
}

TEST_CASE("unknown architectures are rejected") {
  using Add = ops::VecAdd<f32, 128>;
  CHECK_THROWS_WITH_AS(compile<Add>(Target::cuda("sm_70")),
                       doctest::Contains("unsupported CUDA architecture 'sm_70'"), Error);
}

TEST_CASE("matmul operands are copied asynchronously into a ring of num_stages buffers") {
  CompileOptions three;
  three.num_stages = 3;
  std::string ptx = check_kernel<ops::Matmul<f16, 64, 64, 32>>("cp.async.cg.shared.global", three);
  // Each iteration waits for its own group while the next one stays in
  // flight; everything is drained after the loop.
  CHECK(wait_groups(ptx) == std::vector<int>{1, 0});
  CHECK(ptx.find("cp.async.commit_group") != std::string::npos);
  // Two rings of 3 x 4 KB, then the epilogue's scratch.
  CHECK(shared_bytes(ptx) >= 3 * 2 * 64 * 32 * 2);
  // Double buffering waits for everything issued before.
  CompileOptions two;
  two.num_stages = 2;
  CHECK(wait_groups(check_kernel<ops::Matmul<f16, 64, 64, 32>>("cp.async.cg", two)) ==
        std::vector<int>{0, 0});
  // One stage: plain loads, no copies into shared memory (on sm_90a the
  // epilogue's TMA store still copies out of it).
  CompileOptions one;
  one.num_stages = 1;
  std::string single = check_kernel<ops::Matmul<f16, 64, 64, 32>>(nullptr, one);
  CHECK(single.find("cp.async.cg") == std::string::npos);
  CHECK(single.find("cp.async.bulk.tensor.2d.shared") == std::string::npos);
}

TEST_CASE("on sm_90a, products read in place from rings by whole warpgroups run on wgmma") {
  CompileOptions w8;
  w8.num_warps = 8;
  w8.num_stages = 3;
  auto hopper = compile<ops::Matmul<f16, 128, 256, 64>>(Target::cuda("sm_90a"), w8);
  const std::string &ptx = hopper.ir(Stage::Ptx);
  // Two warpgroups, each 64 rows: four k16 steps of m64n256k16 per tile of K.
  CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") != std::string::npos);
  CHECK(ptx.find("wgmma.fence.sync.aligned") != std::string::npos);
  CHECK(ptx.find("wgmma.commit_group.sync.aligned") != std::string::npos);
  // The operands arrive by TMA: one thread issues bulk tensor copies (one
  // per 64-column panel) that complete on a barrier per ring buffer, which
  // every thread waits on; the tensor maps are kernel parameters passed by
  // value, 64-byte aligned.
  CHECK(ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") !=
        std::string::npos);
  CHECK(ptx.find("mbarrier.expect_tx") != std::string::npos);
  CHECK(ptx.find("mbarrier.try_wait.parity") != std::string::npos);
  CHECK(ptx.find(".param .align 64 .b8 " + hopper.name() + "_param_9[128]") != std::string::npos);
  CHECK(ptx.find("kiln_tensormaps") != std::string::npos);
  CHECK(ptx.find("cp.async.cg") == std::string::npos);
  CHECK(ptx.find("mma.sync") == std::string::npos);
  CHECK(ptxas(ptx, "sm_90a", hopper.name()) == 0);
  CHECK(spill_stores(ptx, hopper.name()) == 0);
  auto bf = compile<ops::MatmulBiasGelu<bf16, 128, 128, 64>>(Target::cuda("sm_90a"), w8);
  CHECK(bf.ir(Stage::Ptx).find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") != std::string::npos);
  CHECK(spill_stores(bf.ir(Stage::Ptx), bf.name()) == 0);
  // Without TMA, every thread copies with cp.async, fenced for the async
  // proxy that wgmma reads through.
  CompileOptions noTma = w8;
  noTma.tma = false;
  auto plain = compile<ops::Matmul<f16, 128, 256, 64>>(Target::cuda("sm_90a"), noTma);
  CHECK(plain.ir(Stage::Ptx).find("cp.async.bulk.tensor") == std::string::npos);
  CHECK(plain.ir(Stage::Ptx).find("cp.async.cg.shared.global") != std::string::npos);
  CHECK(plain.ir(Stage::Ptx).find("fence.proxy.async.shared::cta") != std::string::npos);
  CHECK(ptxas(plain.ir(Stage::Ptx), "sm_90a", plain.name()) == 0);
  // sm_80 keeps mma.sync for the same kernel.
  auto ampere = compile<ops::Matmul<f16, 128, 256, 64>>(Target::cuda("sm_80"), w8);
  CHECK(ampere.ir(Stage::Ptx).find("mma.sync.aligned.m16n8k16") != std::string::npos);
  CHECK(ampere.ir(Stage::Ptx).find("wgmma") == std::string::npos);
  // Rows that do not split into whole warpgroups (128 rows over 4 warps) stay on mma.sync.
  CompileOptions w4;
  w4.num_warps = 4;
  w4.num_stages = 3;
  auto quarter = compile<ops::Matmul<f16, 128, 128, 64>>(Target::cuda("sm_90a"), w4);
  CHECK(quarter.ir(Stage::Ptx).find("wgmma") == std::string::npos);
  CHECK(quarter.ir(Stage::Ptx).find("mma.sync.aligned.m16n8k16") != std::string::npos);
}

TEST_CASE("on sm_90a, f32 products that allow TF32 run on wgmma; elsewhere, and without it, on f32 FMAs") {
  CompileOptions w8;
  w8.num_warps = 8;
  w8.num_stages = 3;
  // B transposed (N x K): both operands arrive by TMA (32-column f32
  // panels) and are read in place, K-major, four k8 steps per 32 of K.
  auto bt = compile<ops::MatmulTF32<128, 128, 32, true>>(Target::cuda("sm_90a"), w8);
  const std::string &ptx = bt.ir(Stage::Ptx);
  CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32") != std::string::npos);
  CHECK(ptx.find("cp.async.bulk.tensor.2d") != std::string::npos);
  CHECK(ptx.find("cp.async.cg") == std::string::npos);
  CHECK(ptx.find("fma.rn.f32") == std::string::npos);
  CHECK(ptxas(ptx, "sm_90a", bt.name()) == 0);
  CHECK(spill_stores(ptx, bt.name()) == 0);
  // B as it is (K x N): transposed through registers into scratch, then the same wgmma.
  auto kn = compile<ops::MatmulTF32<128, 128, 32>>(Target::cuda("sm_90a"), w8);
  CHECK(kn.ir(Stage::Ptx).find("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32") != std::string::npos);
  CHECK(ptxas(kn.ir(Stage::Ptx), "sm_90a", kn.name()) == 0);
  CHECK(spill_stores(kn.ir(Stage::Ptx), kn.name()) == 0);
  // sm_80 (no TF32 mma.sync path) and f32 products without TF32 use FMAs.
  auto ampere = compile<ops::MatmulTF32<128, 128, 32, true>>(Target::cuda("sm_80"), w8);
  CHECK(ampere.ir(Stage::Ptx).find("fma.rn.f32") != std::string::npos);
  CHECK(ampere.ir(Stage::Ptx).find("tf32") == std::string::npos);
  CHECK(ptxas(ampere.ir(Stage::Ptx), "sm_80", ampere.name()) == 0);
  CompileOptions w4;
  auto ieee = compile<ops::Matmul<f32, 64, 64, 32>>(Target::cuda("sm_90a"), w4);
  CHECK(ieee.ir(Stage::Ptx).find("wgmma") == std::string::npos);
  CHECK(ieee.ir(Stage::Ptx).find("fma.rn.f32") != std::string::npos);
}

namespace {
/// A product compiled for sm_90a copies its operands with TMA, multiplies
/// on wgmma and does not spill.
template <class K> void check_hopper_product(int warps, int stages) {
  CompileOptions options;
  options.num_warps = warps;
  options.num_stages = stages;
  auto k = compile<K>(Target::cuda("sm_90a"), options);
  const std::string &ptx = k.ir(Stage::Ptx);
  CAPTURE(k.name());
  CHECK(ptx.find("cp.async.bulk.tensor.2d") != std::string::npos);
  CHECK(ptx.find("wgmma.mma_async") != std::string::npos);
  CHECK(ptx.find("cp.async.cg") == std::string::npos);
  // The epilogue's tile leaves through shared memory by TMA too.
  CHECK(ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") != std::string::npos);
  CHECK(spill_stores(ptx, k.name()) == 0);
}
} // namespace

TEST_CASE("on sm_90a, the library's products (GPT-2's prefill tiles, kiln_bench's) run on TMA and wgmma "
          "without spilling") {
  check_hopper_product<ops::Matmul<f16, 128, 128, 64>>(8, 3);
  check_hopper_product<ops::Matmul<f16, 128, 256, 64>>(8, 3);
  check_hopper_product<ops::Matmul<bf16, 128, 192, 64>>(8, 3);
  check_hopper_product<ops::MatmulBiasGelu<f16, 128, 256, 64>>(8, 3);
  check_hopper_product<ops::MatmulBias<f16, 64, 128, 64>>(4, 3);
  check_hopper_product<ops::MatmulBiasGelu<bf16, 64, 128, 64>>(4, 3);
  check_hopper_product<ops::MatmulBiasResidual<f16, 64, 128, 64>>(4, 3);
}

TEST_CASE("on sm_90a, warp-specialised products copy from a producer warp and never synchronise the "
          "program in their loop") {
  for (bool persistent : {false, true}) {
    CAPTURE(persistent);
    CompileOptions options;
    options.num_warps = 8;
    options.num_stages = 3;
    options.warp_specialize = true;
    options.persistent = persistent;
    auto k = compile<ops::MatmulBiasGelu<f16, 128, 256, 64>>(Target::cuda("sm_90a"), options);
    const std::string &ptx = k.ir(Stage::Ptx);
    // 8 consumer warps and a producer warpgroup that hands them its
    // registers; the epilogue's exchanges synchronise the 256 consumer
    // threads on named barrier 1.
    CHECK(ptx.find(".maxntid 384, 1, 1") != std::string::npos);
    CHECK(ptx.find(".maxnreg 168") != std::string::npos);
    CHECK(ptx.find("kiln_threads = 384") != std::string::npos);
    CHECK(ptx.find("setmaxnreg.dec.sync.aligned.u32 \t40;") != std::string::npos);
    CHECK(ptx.find("setmaxnreg.inc.sync.aligned.u32 \t232;") != std::string::npos);
    CHECK(ptx.find("bar.sync \t1, 256;") != std::string::npos);
    CHECK((ptx.find("kiln_virtual_grid") != std::string::npos) == persistent);
    CHECK(ptx.find("cp.async.bulk.tensor.2d") != std::string::npos);
    CHECK(ptx.find("wgmma.mma_async") != std::string::npos);
    CHECK(ptxas(ptx, "sm_90a", k.name()) == 0);
    CHECK(spill_stores(ptx, k.name()) == 0);
  }
  // Next to one consumer warpgroup, one producer warp.
  CompileOptions one;
  one.num_warps = 4;
  one.num_stages = 3;
  one.warp_specialize = one.persistent = true;
  auto small = compile<ops::MatmulBiasGelu<f16, 64, 128, 64>>(Target::cuda("sm_90a"), one);
  CHECK(small.ir(Stage::Ptx).find("kiln_threads = 160") != std::string::npos);
  CHECK(small.ir(Stage::Ptx).find("setmaxnreg") == std::string::npos);
  CHECK(spill_stores(small.ir(Stage::Ptx), small.name()) == 0);
  CompileOptions two = one;
  two.num_warps = 8;
  auto square = compile<ops::Matmul<f16, 128, 128, 64>>(Target::cuda("sm_90a"), two);
  CHECK(spill_stores(square.ir(Stage::Ptx), square.name()) == 0);
  // Without TMA there is nothing for a producer warp to do.
  CompileOptions plain;
  plain.num_warps = 8;
  plain.num_stages = 3;
  plain.tma = false;
  plain.warp_specialize = true;
  auto k = compile<ops::Matmul<f16, 128, 256, 64>>(Target::cuda("sm_90a"), plain);
  CHECK(k.ir(Stage::Ptx).find("kiln_threads") == std::string::npos);
}

TEST_CASE("on sm_90a, a product's epilogue stores its tile with TMA; elsewhere with 16-byte stores") {
  CompileOptions w8;
  w8.num_warps = 8;
  w8.num_stages = 3;
  auto k = compile<ops::MatmulBiasGelu<f16, 128, 128, 64>>(Target::cuda("sm_90a"), w8);
  const std::string &ptx = k.ir(Stage::Ptx);
  // Each thread writes its accumulator elements into shared memory, fenced
  // for the async proxy; one thread copies the two 64-column panels out and
  // waits until they have been read before the program ends. The tensor map
  // of C follows those of A and B.
  CHECK(ptx.find("fence.proxy.async.shared::cta") != std::string::npos);
  CHECK(ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") != std::string::npos);
  CHECK(ptx.find("cp.async.bulk.commit_group") != std::string::npos);
  CHECK(ptx.find("cp.async.bulk.wait_group.read 0") != std::string::npos);
  CHECK(ptx.find(".param .align 64 .b8 " + k.name() + "_param_12[128]") != std::string::npos);
  CHECK(ptx.find("st.global.v4") == std::string::npos);
  CHECK(ptxas(ptx, "sm_90a", k.name()) == 0);
  CHECK(spill_stores(ptx, k.name()) == 0);
  // f32 results (TF32 products): 32-column panels.
  auto tf32 = compile<ops::MatmulTF32<128, 128, 32, true>>(Target::cuda("sm_90a"), w8);
  CHECK(tf32.ir(Stage::Ptx).find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") != std::string::npos);
  CHECK(ptxas(tf32.ir(Stage::Ptx), "sm_90a", tf32.name()) == 0);
  // Warp-specialised and persistent: the consumers store, and wait for the
  // copy before the next tile reuses the buffer.
  CompileOptions ws = w8;
  ws.warp_specialize = ws.persistent = true;
  auto p = compile<ops::MatmulBiasGelu<f16, 128, 256, 64>>(Target::cuda("sm_90a"), ws);
  CHECK(p.ir(Stage::Ptx).find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") != std::string::npos);
  CHECK(ptxas(p.ir(Stage::Ptx), "sm_90a", p.name()) == 0);
  CHECK(spill_stores(p.ir(Stage::Ptx), p.name()) == 0);
  // Without TMA, and on sm_80, the tile is regrouped for 16-byte stores.
  CompileOptions noTma = w8;
  noTma.tma = false;
  auto plain = compile<ops::MatmulBiasGelu<f16, 128, 128, 64>>(Target::cuda("sm_90a"), noTma);
  CHECK(plain.ir(Stage::Ptx).find("cp.async.bulk") == std::string::npos);
  CHECK(plain.ir(Stage::Ptx).find("st.global.v4") != std::string::npos);
  auto ampere = compile<ops::MatmulBiasGelu<f16, 128, 128, 64>>(Target::cuda("sm_80"), w8);
  CHECK(ampere.ir(Stage::Ptx).find("cp.async.bulk") == std::string::npos);
  // Attention's output rows are masked by a length loaded at run time,
  // which no tensor map holds: plain stores.
  using Attn = ops::AttentionPrefill<f16, 64, 64, 64>;
  auto attn = compile<Attn>(Target::cuda("sm_90a"));
  CHECK(attn.ir(Stage::Ptx).find("cp.async.bulk.tensor.2d.global") == std::string::npos);
}

TEST_CASE("persistent kernels must be warp-specialised") {
  CompileOptions options;
  options.persistent = true;
  using Small = ops::Matmul<f16, 64, 64, 64>;
  CHECK_THROWS_WITH_AS(compile<Small>(Target::cuda("sm_90a"), options),
                       doctest::Contains("persistent kernels are warp-specialised"), Error);
}

TEST_CASE("kernels may use more than 48 KB of shared memory") {
  CompileOptions four;
  four.num_stages = 4;
  four.num_warps = 8;
  // 4 stages x (128x32 + 32x128) f16 = 64 KB of rings (the 64 KB f32
  // epilogue tile reuses their bytes).
  std::string ptx = check_kernel<ops::Matmul<f16, 128, 128, 32>>(".extern .shared", four);
  CHECK(shared_bytes(ptx) > 48 * 1024);
}

TEST_CASE("a kernel that needs more shared memory than the GPU has fails with one short message") {
  CompileOptions options;
  options.num_warps = 8;
  options.num_stages = 8; // 8 x 48 KB of rings
  try {
    compile<ops::Matmul<f16, 128, 256, 64>>(Target::cuda("sm_90a"), options);
    FAIL("compiled");
  } catch (const Error &e) {
    std::string message = e.what();
    CAPTURE(message);
    CHECK(message.find("bytes of shared memory (limit 232448); use smaller blocks or fewer stages") !=
          std::string::npos);
    CHECK(message.find("gpu.func") == std::string::npos); // no IR dump
    CHECK(std::count(message.begin(), message.end(), '\n') < 4);
  }
}

