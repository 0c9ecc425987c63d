//===- gpt2_bench.cpp - kiln's GPT-2 generation speed ----------------------===//
//
//   kiln-gpt2-bench [--size 124M] [--precision fp16] [--mode M] [--profile] > kiln_gpt2.json
//   kiln-gpt2-bench --batches 1,2,4,8,16,32,64 --prompts 64 --new 128 > curve.json
//   kiln-gpt2-bench --compare [--cold] > kiln_modes.json
//
// Seeded random weights (gpt2::Weights::random, seed 1: the same ones
// bench/gpt2_baselines.py builds for PyTorch). For batch 1 and 8 (--batches),
// prompts of 16, 64 and 256 tokens (--prompts) and 128 and 512 new tokens
// (--new): time to first token (prefill + first sample), ms per decode step,
// tokens per second. Also the setup time (weights to GPU + kernels; cold or
// warm depending on the kernel cache) and the device memory in use. With
// --profile: instead, where the time of one decode step goes, kernel by
// kernel, for each batch: each role's kernels launched on their own ("us"),
// and what they add to the step's graph ("graph_us": the graph's time less
// that of the graph captured without them).
//
// With --compare: torch.compile's classic comparison, kiln's modes side by
// side (default, reduce-overhead, max-autotune; gpt2::Mode). For each mode a
// new Model: its first call (setup plus the first generation), then for
// prompts of 16, 64 and 256 tokens the first generation at that length (with
// the kernels it compiled and tuned: kiln's "recompiles") and the median of
// three timed generations of 128 new tokens. --cold gives each mode an empty
// kernel and tuning cache of its own. bench/gpt2_compare.py puts these next
// to bench/gpt2_baselines.py's PyTorch rows and plots them.
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/model.hpp"
#include "kiln/runtime/cuda.hpp"
#include "kiln/runtime/tool.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::vector<int32_t>> promptsOf(int batch, int prompt) {
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> p;
    for (int t = 0; t < prompt; ++t)
      p.push_back(int32_t((t * 7919 + b * 104729) % 50000));
    prompts.push_back(p);
  }
  return prompts;
}

struct Timed {
  double total_s = 0, ttft_s = 0, ms_per_token = 0;
};

/// One generation of `newTokens` per prompt, timed from the call.
Timed generate(gpt2::Model &model, int batch, int prompt, int newTokens) {
  gpt2::GenerateOptions go;
  go.max_new_tokens = newTokens;
  go.stop_at_eot = false;
  Timed t;
  double end = 0;
  int seen = 0;
  auto start = Clock::now();
  model.generate(promptsOf(batch, prompt), go, [&](int, int32_t) {
    double now = since(start);
    if (++seen == batch)
      t.ttft_s = now; // every sequence has its first token
    end = now;
  });
  t.total_s = since(start);
  t.ms_per_token = (end - t.ttft_s) / double(newTokens - 1) * 1e3;
  return t;
}

int tunedKernels(const gpt2::Explain &e) {
  return int(std::count_if(e.kernels.begin(), e.kernels.end(),
                           [](auto &k) { return k.source == "tuned"; }));
}

/// kiln's modes side by side (see the file comment).
void compareModes(const gpt2::Weights &w, const Target &target, gpt2::Precision precision,
                  const std::string &size, const std::string &precisionName, int batch, bool cold) {
  constexpr int kNew = 128;
  std::string coldRoot;
  if (cold) {
    char tmpl[] = "/tmp/kiln-gpt2-bench-XXXXXX";
    if (!mkdtemp(tmpl))
      throw Error("kiln-gpt2-bench: cannot make a temporary folder for --cold");
    coldRoot = tmpl;
  }
  std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", \"batch\": %d, "
              "\"new_tokens\": %d, \"cold\": %s, \"modes\": [",
              size.c_str(), precisionName.c_str(), cuda::device_name().c_str(), batch, kNew,
              cold ? "true" : "false");
  const char *sep = "";
  for (gpt2::Mode mode : {gpt2::Mode::Default, gpt2::Mode::ReduceOverhead, gpt2::Mode::MaxAutotune}) {
    std::string name = gpt2::to_string(mode);
    if (cold) {
      std::string dir = coldRoot + "/" + name;
      std::filesystem::create_directories(dir);
      setenv("KILN_CACHE_DIR", dir.c_str(), 1);
    }
    gpt2::ModelOptions mo;
    mo.max_batch = batch;
    auto t0 = Clock::now();
    gpt2::Model model(w, target, precision, gpt2::apply_mode(mode, mo));
    double setup = since(t0);
    std::printf("%s\n {\"mode\": \"%s\", \"setup_s\": %.3f, \"kernels_at_setup\": %zu, \"prompts\": [",
                sep, name.c_str(), setup, model.explain().kernels.size());
    sep = ",";
    double firstCall = 0;
    for (int prompt : {16, 64, 256}) {
      gpt2::Explain before = model.explain();
      Timed first = generate(model, batch, prompt, kNew);
      if (prompt == 16)
        firstCall = setup + first.total_s;
      gpt2::Explain after = model.explain();
      std::vector<Timed> runs;
      for (int i = 0; i < 3; ++i)
        runs.push_back(generate(model, batch, prompt, kNew));
      std::sort(runs.begin(), runs.end(), [](auto &a, auto &b) { return a.total_s < b.total_s; });
      const Timed &m = runs[1];
      std::printf("%s\n  {\"prompt\": %d, \"first_ms\": %.3f, \"new_kernels\": %zu, \"tuned_kernels\": %d, "
                  "\"tuning_s\": %.3f, \"generate_ms\": %.3f, \"ttft_ms\": %.3f, \"ms_per_token\": %.4f}",
                  prompt == 16 ? "" : ",", prompt, first.total_s * 1e3,
                  after.kernels.size() - before.kernels.size(), tunedKernels(after) - tunedKernels(before),
                  after.tuning_seconds - before.tuning_seconds, m.total_s * 1e3, m.ttft_s * 1e3,
                  m.ms_per_token);
      std::fflush(stdout);
    }
    const gpt2::Explain &e = model.explain();
    std::printf("],\n  \"first_call_s\": %.3f, \"tuning_s\": %.3f, \"tuned_kernels\": %d, \"kernels\": %zu, "
                "\"decode_graph\": %s}",
                firstCall, e.tuning_seconds, tunedKernels(e), e.kernels.size(),
                e.decode_graph ? "true" : "false");
  }
  std::printf("]}\n");
  if (cold)
    std::filesystem::remove_all(coldRoot);
}

} // namespace

int main(int argc, char **argv) {
  return tool::run("kiln-gpt2-bench", [&] {
    std::string size = "124M", precision = "fp16", mode = "reduce-overhead";
    bool profile = false, compare = false, cold = false;
    int compareBatch = 1;
    CLI::App app("kiln's GPT-2 generation speed, as JSON on stdout", "kiln-gpt2-bench");
    app.add_option("--size", size, "124M, 355M, 774M or 1.5B");
    app.add_option("--precision", precision, "fp16, bf16 or fp32");
    app.add_option("--mode", mode, "default, reduce-overhead or max-autotune");
    app.add_flag("--profile", profile, "per-kernel times of one decode step instead");
    app.add_flag("--compare", compare, "every mode side by side, prompts of 16, 64 and 256 tokens");
    app.add_option("--batch", compareBatch, "sequences per generation with --compare (1)");
    app.add_flag("--cold", cold, "with --compare: an empty kernel and tuning cache per mode");
    std::vector<int> batches{1, 8}, prompts{16, 64, 256}, newTokenCounts{128, 512};
    app.add_option("--batches", batches, "sequences per generation, e.g. 1,2,4,8,16,32,64 (1,8)")
        ->delimiter(',');
    app.add_option("--prompts", prompts, "prompt lengths (16,64,256)")->delimiter(',');
    app.add_option("--new", newTokenCounts, "tokens generated per run (128,512)")->delimiter(',');
    int decodeRows = gpt2::ModelOptions{}.decode_kernel_rows;
    app.add_option("--decode-kernel-rows", decodeRows,
                   "steps of up to this many sequences on the decode-step kernels (0, 1, 2, 4 or 8)");
    int fewRows = gpt2::ModelOptions{}.few_row_products;
    app.add_option("--few-rows", fewRows,
                   "steps of 2 to this many sequences run the few-row kernels (0-16)");
    int manyRows = gpt2::ModelOptions{}.many_row_products;
    app.add_option("--many-rows", manyRows,
                   "steps of more sequences than --few-rows, up to this many, run the many-row kernels (0-64)");
    int fewFuse = gpt2::ModelOptions{}.few_row_fusion ? 1 : 0;
    app.add_option("--few-fuse", fewFuse,
                   "1: the few-row kernels run the layernorms (and the cache write) inside; 0 (default): as launches of their own");
    int prefetch = gpt2::ModelOptions{}.prefetch_weights ? 1 : 0;
    app.add_option("--prefetch", prefetch,
                   "1: each decode-step product brings the next one's weight into L2 while it runs; 0: not");
    int fusedMlp = gpt2::ModelOptions{}.fused_mlp_rows;
    app.add_option("--fused-mlp-rows", fusedMlp,
                   "steps of up to this many sequences run each MLP as one launch (0, 1 or 2)");
    int residentKeys = gpt2::ModelOptions{}.resident_attention_keys;
    app.add_option("--resident-keys", residentKeys,
                   "untuned batch-1 decode attention holds its first keys in registers for contexts of up to "
                   "this many keys' bucket (0: never; 512)");
    if (!tool::parse(app, argc, argv))
      return 0;
    gpt2::Mode parsedMode;
    try {
      parsedMode = gpt2::parse_mode(mode);
    } catch (const Error &) {
      throw tool::UsageError("--mode: unknown mode '" + mode + "' (default, reduce-overhead or max-autotune)");
    }
    if (compareBatch < 1 || compareBatch > 64)
      throw tool::UsageError("--batch must be between 1 and 64");
    for (int b : batches)
      if (b < 1 || b > 64)
        throw tool::UsageError("--batches: every batch must be between 1 and 64");
    for (int p : prompts)
      if (p < 1 || p > 512)
        throw tool::UsageError("--prompts: every prompt must be between 1 and 512 tokens");
    for (int n : newTokenCounts)
      if (n < 2 || n > 512)
        throw tool::UsageError("--new: every count must be between 2 and 512 tokens");
    if (decodeRows != 0 && decodeRows != 1 && decodeRows != 2 && decodeRows != 4 && decodeRows != 8)
      throw tool::UsageError("--decode-kernel-rows must be 0, 1, 2, 4 or 8");
    if (fewRows < 0 || fewRows > 16)
      throw tool::UsageError("--few-rows must be between 0 and 16");
    if (manyRows < 0 || manyRows > 64)
      throw tool::UsageError("--many-rows must be between 0 and 64");
    if (fewFuse != 0 && fewFuse != 1)
      throw tool::UsageError("--few-fuse must be 0 or 1");
    if (prefetch != 0 && prefetch != 1)
      throw tool::UsageError("--prefetch must be 0 or 1");
    if (fusedMlp < 0 || fusedMlp > 2)
      throw tool::UsageError("--fused-mlp-rows must be 0, 1 or 2");
    if (residentKeys < 0)
      throw tool::UsageError("--resident-keys must be 0 or more");
    gpt2::Precision prec = gpt2::parse_precision(precision);
    std::string why;
    if (!cuda::available(&why))
      throw Error("kiln-gpt2-bench needs a GPU: " + why);
    Target target = Target::cuda(cuda::device_arch());
    std::size_t before = cuda::memory_in_use();
    auto t0 = Clock::now();
    gpt2::Weights w = gpt2::Weights::random(gpt2::Config::preset(size), 1);
    double weightsSeconds = since(t0);
    if (compare) {
      compareModes(w, target, prec, size, precision, compareBatch, cold);
      return 0;
    }
    gpt2::ModelOptions mo;
    mo.max_batch = std::max(8, *std::max_element(batches.begin(), batches.end()));
    mo.decode_kernel_rows = decodeRows;
    mo.few_row_products = fewRows;
    mo.many_row_products = manyRows;
    mo.few_row_fusion = fewFuse == 1;
    mo.prefetch_weights = prefetch == 1;
    mo.fused_mlp_rows = std::min(fusedMlp, decodeRows);
    mo.resident_attention_keys = residentKeys;
    auto t1 = Clock::now();
    gpt2::Model model(w, target, prec, gpt2::apply_mode(parsedMode, mo));
    double setupSeconds = since(t1);
    std::size_t peak = cuda::memory_in_use();
    const gpt2::Explain &e = model.explain();
    if (profile) {
      std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", "
                  "\"profiles\": [",
                  size.c_str(), precision.c_str(), cuda::device_name().c_str());
      const char *sep = "";
      for (int batch : batches)
        for (int prompt : {16, 256}) {
          gpt2::StepProfile p = model.profile_decode(promptsOf(batch, prompt));
          std::printf("%s\n {\"batch\": %d, \"prompt\": %d, \"launches\": %d, "
                      "\"kernels_us\": %.2f, \"graph_us\": %.2f, \"kernels\": [",
                      sep, batch, prompt, p.launches, p.kernels_us, p.graph_us);
          for (std::size_t i = 0; i < p.kernels.size(); ++i)
            std::printf("%s\n  {\"role\": \"%s\", \"launches\": %d, \"us\": %.2f, \"graph_us\": %.2f}",
                        i ? "," : "", p.kernels[i].role.c_str(), p.kernels[i].launches,
                        p.kernels[i].us, p.kernels[i].graph_us);
          std::printf("]}");
          sep = ",";
        }
      std::printf("]}\n");
      return 0;
    }
    std::printf(
        "{\"model\": \"%s\", \"precision\": \"%s\", \"mode\": \"%s\", \"decode_kernel_rows\": %d, \"few_rows\": %d, \"many_rows\": %d, \"few_fuse\": %d, \"prefetch\": %d, \"fused_mlp_rows\": %d, \"resident_keys\": %d, "
        "\"device\": \"%s\", \"weights_s\": %.3f, \"setup_s\": %.3f, \"compile_s\": %.3f, \"kernels_from_cache\": %d, \"kernels\": %zu, "
        "\"device_bytes\": %zu, \"runs\": [",
        size.c_str(), precision.c_str(), mode.c_str(), decodeRows, fewRows, manyRows, fewFuse, prefetch, mo.fused_mlp_rows,
        residentKeys, cuda::device_name().c_str(), weightsSeconds,
        setupSeconds, e.compile_seconds,
        int(std::count_if(e.kernels.begin(), e.kernels.end(),
                          [](auto &k) { return k.from_cache; })),
        e.kernels.size(), peak - before);
    bool first = true;
    for (int batch : batches)
      for (int prompt : prompts)
        for (int newTokens : newTokenCounts) {
          generate(model, batch, prompt, newTokens); // warm-up: graphs captured, caches hot
          Timed t = generate(model, batch, prompt, newTokens);
          double ttft = t.ttft_s, msPerToken = t.ms_per_token;
          std::printf("%s{\"batch\": %d, \"prompt\": %d, \"new_tokens\": %d, \"ttft_ms\": %.3f, "
                      "\"ms_per_token\": %.4f, \"tokens_per_s\": %.1f}",
                      first ? "" : ", ", batch, prompt, newTokens, ttft * 1e3, msPerToken,
                      batch * 1e3 / msPerToken);
          std::fflush(stdout);
          first = false;
        }
    std::printf("], \"launches_per_decode_step\": %d, \"decode_graph\": %s}\n",
                e.launches_per_decode_step, e.decode_graph ? "true" : "false");
    return 0;
  });
}
