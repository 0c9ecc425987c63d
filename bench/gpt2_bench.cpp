//===- gpt2_bench.cpp - kiln's GPT-2 generation speed ----------------------===//
//
//   kiln-gpt2-bench [--size 124M] [--precision fp16] [--profile] > kiln_gpt2.json
//
// Seeded random weights (gpt2::Weights::random, seed 1: the same ones
// bench/gpt2_baselines.py builds for PyTorch). For batch 1 and 8, prompts of
// 16, 64 and 256 tokens and 128 and 512 new tokens: time to first token
// (prefill + first sample), ms per decode step, tokens per second. Also the
// setup time (weights to GPU + kernels; cold or warm depending on the kernel
// cache) and the device memory in use. With --profile: instead, where the
// time of one decode step goes, kernel by kernel, for batch 1 and 8.
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/model.hpp"
#include "kiln/runtime/cuda.hpp"
#include "kiln/runtime/tool.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

using namespace kiln;
using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
  return tool::run("kiln-gpt2-bench", [&] {
    std::string size = "124M", precision = "fp16";
    bool profile = false;
    CLI::App app("kiln's GPT-2 generation speed, as JSON on stdout", "kiln-gpt2-bench");
    app.add_option("--size", size, "124M, 355M, 774M or 1.5B");
    app.add_option("--precision", precision, "fp16, bf16 or fp32");
    app.add_flag("--profile", profile, "per-kernel times of one decode step instead");
    if (!tool::parse(app, argc, argv))
      return 0;
    std::string why;
    if (!cuda::available(&why))
      throw Error("kiln-gpt2-bench needs a GPU: " + why);
    std::size_t before = cuda::memory_in_use();
    auto t0 = Clock::now();
    gpt2::Weights w = gpt2::Weights::random(gpt2::Config::preset(size), 1);
    double weightsSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
    gpt2::ModelOptions mo;
    mo.max_batch = 8;
    auto t1 = Clock::now();
    gpt2::Model model(w, Target::cuda(cuda::device_arch()), gpt2::parse_precision(precision), mo);
    double setupSeconds = std::chrono::duration<double>(Clock::now() - t1).count();
    std::size_t peak = cuda::memory_in_use();
    const gpt2::Explain &e = model.explain();
    auto promptsOf = [](int batch, int prompt) {
      std::vector<std::vector<int32_t>> prompts;
      for (int b = 0; b < batch; ++b) {
        std::vector<int32_t> p;
        for (int t = 0; t < prompt; ++t)
          p.push_back(int32_t((t * 7919 + b * 104729) % 50000));
        prompts.push_back(p);
      }
      return prompts;
    };
    if (profile) {
      std::printf("{\"model\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", "
                  "\"profiles\": [",
                  size.c_str(), precision.c_str(), cuda::device_name().c_str());
      const char *sep = "";
      for (int batch : {1, 8})
        for (int prompt : {16, 256}) {
          gpt2::StepProfile p = model.profile_decode(promptsOf(batch, prompt));
          std::printf("%s\n {\"batch\": %d, \"prompt\": %d, \"launches\": %d, "
                      "\"kernels_us\": %.2f, \"graph_us\": %.2f, \"kernels\": [",
                      sep, batch, prompt, p.launches, p.kernels_us, p.graph_us);
          for (std::size_t i = 0; i < p.kernels.size(); ++i)
            std::printf("%s\n  {\"role\": \"%s\", \"launches\": %d, \"us\": %.2f}",
                        i ? "," : "", p.kernels[i].role.c_str(), p.kernels[i].launches,
                        p.kernels[i].us);
          std::printf("]}");
          sep = ",";
        }
      std::printf("]}\n");
      return 0;
    }
    std::printf(
        "{\"model\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", \"weights_s\": %.3f, "
        "\"setup_s\": %.3f, \"compile_s\": %.3f, \"kernels_from_cache\": %d, \"kernels\": %zu, "
        "\"device_bytes\": %zu, \"runs\": [",
        size.c_str(), precision.c_str(), cuda::device_name().c_str(), weightsSeconds, setupSeconds,
        e.compile_seconds,
        int(std::count_if(e.kernels.begin(), e.kernels.end(),
                          [](auto &k) { return k.from_cache; })),
        e.kernels.size(), peak - before);
    bool first = true;
    for (int batch : {1, 8})
      for (int prompt : {16, 64, 256})
        for (int newTokens : {128, 512}) {
          auto prompts = promptsOf(batch, prompt);
          gpt2::GenerateOptions go;
          go.max_new_tokens = newTokens;
          go.stop_at_eot = false;
          model.generate(prompts, go); // warm-up: graphs captured, caches hot
          double ttft = 0, end = 0;
          int seen = 0;
          auto start = Clock::now();
          model.generate(prompts, go, [&](int, int32_t) {
            double now = std::chrono::duration<double>(Clock::now() - start).count();
            if (++seen == batch)
              ttft = now; // every sequence has its first token
            end = now;
          });
          double msPerToken = (end - ttft) / double(newTokens - 1) * 1e3;
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
