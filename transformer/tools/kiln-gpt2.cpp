//===- kiln-gpt2.cpp - generate text with a GPT-2 made of kiln kernels -----===//
//
//   kiln-gpt2 --model DIR --prompt "Hello, my name is" --max-new-tokens 32
//   echo "Once upon a time" | kiln-gpt2 --random 124M --device cpu
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/model.hpp"
#include "kiln/gpt2/tokenizer.hpp"
#include "kiln/runtime/cuda.hpp"
#include "kiln/runtime/tool.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#ifndef KILN_DEFAULT_VOCAB_DIR
#define KILN_DEFAULT_VOCAB_DIR ""
#endif

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const char *kUsage = R"(usage: kiln-gpt2 (--model DIR | --llmc FILE | --random SIZE) [options]

  --model DIR          HF GPT-2 directory (config.json, model.safetensors)
  --llmc FILE          llm.c checkpoint (gpt2_124M.bin)
  --random SIZE        seeded random weights: 124M, 355M, 774M, 1.5B or tiny
  --prompt TEXT        the prompt (repeatable: one sequence each); default: stdin;
                       an empty prompt generates unconditionally
  --max-new-tokens N   tokens to generate per prompt (default 64)
  --batch N            run N copies of the prompt(s) together (default 1)
  --temperature T      0 (default): greedy; otherwise sample from softmax(logits / T)
  --top-k K            sample among the K most likely tokens (0, default: all)
  --top-p P            ... then among the fewest whose probability reaches P (default 1)
  --seed N             seed of the sampling and of --random weights (default 1)
  --device cuda|cpu    default: cuda when a GPU is present, else cpu
  --precision P        fp16 (GPU default), bf16 or fp32 (CPU: fp32 only)
  --max-seq N          KV-cache length per sequence (default: the model's context)
  --tokenizer DIR      vocab.json + merges.txt or encoder.json + vocab.bpe
                       (default: the model directory, then $KILN_GPT2_VOCAB,
                       then the files the setup step downloaded)
  --mode M             default: kernels launched one by one; reduce-overhead (the
                       default mode): each decode step replayed as a CUDA graph;
                       max-autotune: also tune every prefill product for this GPU
                       and prompt shape first (winners persist for later runs)
  --no-graphs          launch decode steps one kernel at a time (as --mode default)
  --explain            print the kernels, their configs and where each came from
                       (heuristic, tuned, tuning cache), compile times, cache hits,
                       launches and graphs per decode step
  --help
)";

struct Args {
  std::string model, llmc, random, device, precision, tokenizer, mode = "reduce-overhead";
  std::vector<std::string> prompts;
  int maxNew = 64, batch = 1, maxSeq = 0;
  double temperature = 0, topP = 1;
  int topK = 0;
  uint64_t seed = 1;
  bool explain = false, graphs = true, help = false;
};

using tool::UsageError;

/// Parses the command line; usage errors throw UsageError (exit 2).
Args parse(int argc, char **argv) {
  Args a;
  CLI::App app("generate text with a GPT-2 made of kiln kernels", "kiln-gpt2");
  app.set_help_flag(); // kUsage is the help
  app.add_flag("-h,--help", a.help);
  app.add_option("--model", a.model);
  app.add_option("--llmc", a.llmc);
  app.add_option("--random", a.random);
  app.add_option("--prompt", a.prompts)->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--max-new-tokens", a.maxNew)->check(tool::integer(0, 1 << 30));
  // Sizes that cannot fit are refused when the model is set up, with the
  // memory they would need; here only what no machine could hold.
  app.add_option("--batch", a.batch)->check(tool::integer(1, 1 << 20));
  app.add_option("--max-seq", a.maxSeq)->check(tool::integer(2, 1 << 30));
  app.add_option("--seed", a.seed)->check(tool::integer(0, INT32_MAX));
  app.add_option("--temperature", a.temperature)->check(tool::number());
  app.add_option("--top-k", a.topK)->check(tool::integer(0, 1 << 30));
  app.add_option("--top-p", a.topP)->check(tool::number());
  app.add_option("--device", a.device);
  app.add_option("--precision", a.precision);
  app.add_option("--tokenizer", a.tokenizer);
  app.add_flag("--explain", a.explain);
  app.add_option("--mode", a.mode);
  bool noGraphs = false;
  app.add_flag("--no-graphs", noGraphs);
  tool::parse(app, argc, argv);
  a.graphs = !noGraphs;
  if (a.help)
    return a;
  try {
    gpt2::parse_mode(a.mode);
  } catch (const Error &) {
    throw UsageError("--mode: unknown mode '" + a.mode + "' (default, reduce-overhead or max-autotune)");
  }
  if (a.temperature < 0)
    throw UsageError("--temperature must be >= 0");
  if (!(a.topP > 0 && a.topP <= 1))
    throw UsageError("--top-p must be in (0, 1], got " + std::to_string(a.topP));
  int sources = !a.model.empty() + !a.llmc.empty() + !a.random.empty();
  if (sources != 1)
    throw UsageError("give exactly one of --model DIR, --llmc FILE, --random SIZE");
  if (!a.device.empty() && a.device != "cuda" && a.device != "cpu")
    throw UsageError("--device must be cuda or cpu, got '" + a.device + "'");
  return a;
}

gpt2::Weights loadWeights(const Args &a) {
  if (!a.model.empty())
    return gpt2::Weights::from_hf_dir(a.model);
  if (!a.llmc.empty())
    return gpt2::Weights::from_llmc(a.llmc);
  gpt2::Config c;
  if (a.random == "tiny")
    c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.n_ctx = 256;
  else
    c = gpt2::Config::preset(a.random);
  return gpt2::Weights::random(c, a.seed);
}

/// The context as far as it is known before the weights load (cheaply:
/// --max-seq, the preset, or the directory's config.json), to stop
/// tokenising a prompt that cannot fit; the exact check follows the load.
int contextBefore(const Args &a) {
  if (a.maxSeq > 0)
    return std::min(a.maxSeq, gpt2::Config::kMaxCtx);
  if (a.random == "tiny")
    return 256;
  try {
    if (!a.random.empty())
      return gpt2::Config::preset(a.random).n_ctx;
    if (!a.model.empty())
      return gpt2::read_hf_config((fs::path(a.model) / "config.json").string()).n_ctx;
  } catch (const Error &) {
    // Reported when the weights load.
  }
  return gpt2::Config::kMaxCtx;
}

gpt2::Tokenizer loadTokenizer(const Args &a) {
  if (!a.tokenizer.empty())
    return gpt2::Tokenizer::from_dir(a.tokenizer);
  std::vector<std::string> dirs;
  if (!a.model.empty())
    dirs.push_back(a.model);
  if (const char *env = std::getenv("KILN_GPT2_VOCAB"))
    dirs.push_back(env);
  dirs.push_back(KILN_DEFAULT_VOCAB_DIR);
  for (const std::string &d : dirs) {
    if (d.empty())
      continue;
    auto has = [&](const char *name) {
      std::error_code ec; // a folder that cannot be searched holds nothing we can use
      return fs::exists(fs::path(d) / name, ec);
    };
    bool hf = has("vocab.json") && has("merges.txt");
    bool npm = has("encoder.json") && has("vocab.bpe");
    if (hf || npm)
      return gpt2::Tokenizer::from_dir(d);
  }
  throw Error(
      "no GPT-2 tokenizer files found (looked in the model directory, $KILN_GPT2_VOCAB and " +
      std::string(KILN_DEFAULT_VOCAB_DIR) + "); pass --tokenizer DIR or run scripts/setup.sh");
}

} // namespace

int main(int argc, char **argv) {
  return tool::run("kiln-gpt2", [&] {
    Args a = parse(argc, argv);
    if (a.help) {
      std::cout << kUsage;
      return 0;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    // Starting the driver and creating the GPU context takes a good part of
    // a start: it runs while the tokenizer and the weights load.
    std::shared_future<std::pair<bool, std::string>> probe =
        std::async(std::launch::async, [wanted = a.device != "cpu"] {
          std::string why;
          bool ok = wanted && cuda::available(&why);
          return std::make_pair(ok, why);
        });
    if (!a.precision.empty())
      (void)gpt2::parse_precision(a.precision);

    gpt2::Tokenizer tok = loadTokenizer(a);
    if (a.prompts.empty()) {
      std::string text((std::istreambuf_iterator<char>(std::cin)),
                       std::istreambuf_iterator<char>());
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
        text.pop_back();
      a.prompts.push_back(text);
    }
    // Each prompt once, giving up as soon as it cannot fit the context.
    int limit = contextBefore(a);
    std::vector<std::vector<int32_t>> encoded;
    for (const std::string &p : a.prompts) {
      std::optional<std::vector<int32_t>> ids = tok.encode(p, std::size_t(limit - 1));
      if (!ids)
        throw Error("the prompt has more than " + std::to_string(limit - 1) +
                    " tokens; the context holds " + std::to_string(limit) +
                    " (prompt plus new tokens)");
      if (ids->empty()) // unconditional: start after <|endoftext|>, as GPT-2 does
        ids->push_back(tok.eot());
      encoded.push_back(std::move(*ids));
    }
    std::vector<std::vector<int32_t>> prompts;
    for (int r = 0; r < a.batch; ++r)
      prompts.insert(prompts.end(), encoded.begin(), encoded.end());

    // Without a GPU the probe is usually done by now: say so before loading.
    if (a.device == "cuda" && probe.wait_for(std::chrono::seconds(0)) == std::future_status::ready &&
        !probe.get().first)
      throw Error("--device cuda: " + probe.get().second);
    gpt2::Weights weights = loadWeights(a);
    if (weights.config.vocab_size != tok.vocab_size())
      throw Error("the model's vocabulary has " + std::to_string(weights.config.vocab_size) +
                  " tokens, the tokenizer's " + std::to_string(tok.vocab_size()));
    // Before anything is printed: a prompt that cannot fit is an error, not
    // an echo followed by one.
    int context = a.maxSeq > 0 ? std::min(a.maxSeq, weights.config.n_ctx) : weights.config.n_ctx;
    for (const auto &p : prompts)
      if (int64_t(p.size()) >= context)
        throw Error("the prompt has " + std::to_string(p.size()) + " tokens; the context holds " +
                    std::to_string(context) + " (prompt plus new tokens)");
    const auto &[haveGpu, why] = probe.get();
    std::string device = a.device.empty() ? (haveGpu ? "cuda" : "cpu") : a.device;
    if (device == "cuda" && !haveGpu)
      throw Error("--device cuda: " + why);
    Target target = device == "cuda" ? Target::cuda(cuda::device_arch()) : Target::cpu();
    gpt2::Precision precision = gpt2::parse_precision(
        a.precision.empty() ? (device == "cuda" ? "fp16" : "fp32") : a.precision);
    double loadSeconds = seconds();
    gpt2::ModelOptions mo;
    mo.max_batch = int(prompts.size());
    mo.max_seq = a.maxSeq;
    mo = gpt2::apply_mode(gpt2::parse_mode(a.mode), mo);
    mo.cuda_graphs = mo.cuda_graphs && a.graphs;
    gpt2::Model model(weights, target, precision, mo);
    double readySeconds = seconds();

    gpt2::GenerateOptions go;
    go.max_new_tokens = a.maxNew;
    go.eot = tok.eot();
    go.temperature = float(a.temperature);
    go.top_k = a.topK;
    go.top_p = float(a.topP);
    go.seed = int32_t(a.seed);
    bool stream = prompts.size() == 1;
    if (stream) {
      std::cout << a.prompts[0] << std::flush;
    }
    double firstToken = -1;
    auto out = model.generate(prompts, go, [&](int i, int32_t t) {
      if (firstToken < 0)
        firstToken = seconds();
      if (stream && t != tok.eot())
        std::cout << tok.token_bytes(t) << std::flush;
    });
    double total = seconds();
    if (stream) {
      std::cout << "\n";
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::vector<int32_t> shown;
        for (int32_t t : out[i])
          if (t != tok.eot())
            shown.push_back(t);
        std::cout << "[" << i << "] " << a.prompts[i % a.prompts.size()] << tok.decode(shown)
                  << "\n";
      }
    }
    std::size_t generated = 0;
    for (auto &o : out)
      generated += o.size();
    if (a.explain) {
      const gpt2::Explain &e = model.explain();
      std::cerr << "\n== kiln-gpt2 --explain ==\n"
                << "model: " << weights.config.describe() << "\n"
                << "device: " << (device == "cuda" ? cuda::device_name() : "cpu") << ", precision "
                << gpt2::to_string(precision) << ", " << prompts.size() << " sequence(s)\n"
                << "mode: " << a.mode << "\n"
                << "kernels (" << e.kernels.size() << ", " << e.compile_seconds
                << " s of compilation summed over kernels compiled in parallel, " << e.tuning_seconds
                << " s tuning):\n";
      for (const auto &k : e.kernels) {
        std::cerr << "  " << k.role << ": " << k.name;
        if (device == "cuda")
          std::cerr << " (" << k.num_warps << " warps, " << k.num_stages << " stages)";
        if (k.source == "heuristic")
          std::cerr << "  heuristic, " << (k.from_cache ? "cache hit" : "compiled") << " in "
                    << k.compile_seconds * 1e3 << " ms\n";
        else
          std::cerr << "  " << k.source << " in " << k.compile_seconds * 1e3 << " ms\n";
      }
      std::cerr << "prefill: " << e.launches_per_prefill << " launches per prompt\n"
                << "decode step: " << e.launches_per_decode_step << " launches"
                << (e.decode_graph ? ", captured once as a CUDA graph, replayed " +
                                         std::to_string(e.graph_replays) + " times"
                                   : ", launched one by one")
                << "\n"
                << "time since start: tokenizer and weights loaded " << loadSeconds
                << " s, model ready " << readySeconds << " s (weights to the device "
                << e.prepare_seconds << " s, kernels " << e.kernels_seconds
                << " s), first token " << firstToken << " s; " << generated << " tokens in "
                << total - readySeconds << " s\n";
    }
    return 0;
  });
}
