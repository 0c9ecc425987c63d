//===- model.hpp - a GPT-2 decoder made of kiln kernels --------------------===//
//
//   auto w = gpt2::Weights::from_hf_dir("gpt2");
//   gpt2::Model model(w, Target::cuda(cuda::device_arch()), gpt2::Precision::F16);
//   auto out = model.generate({tok.encode("Hello")}, {.max_new_tokens = 32});
//
// Every step of the forward pass is a kiln kernel. The KV cache is
// preallocated; a prompt is prefilled in one pass per layer; decode steps
// keep tokens and positions on the device, so on a GPU one step is captured
// once as a CUDA graph and replayed for every position.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/gpt2/weights.hpp"
#include "kiln/core/target.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::gpt2 {

enum class Precision { F32, F16, BF16 };
Precision parse_precision(const std::string &name); ///< "fp32", "fp16", "bf16"
std::string to_string(Precision p);

/// Where the prefill products' configurations (tiles, warps, stages,
/// schedule) come from.
enum class Tuning {
  Heuristic, ///< the blocks' defaults, chosen on an H200
  Cached,    ///< a winner an earlier tuning persisted for this GPU and shape, else the default
  Tune,      ///< tune each new prefill shape on first use (and persist the winners)
};

struct ModelOptions {
  int max_batch = 1;
  int max_seq = 0; ///< KV-cache length per sequence; 0: the model's context
  bool cuda_graphs = true;
  Tuning tuning = Tuning::Cached;
  /// Decode steps of up to this many sequences run the decode-step kernels
  /// (ops::DecodeLinear, ops::DecodeQkv): 0, 1, 2, 4 or 8, kernels of 1, 2,
  /// 4 and 8 rows up to that count (and no further than max_batch needs), a
  /// step running the smallest that holds its sequences; larger batches run
  /// the few-row kernels below. The default, 4: on an H100 a 124M step of
  /// 2 sequences took 0.31 ms on the 2-row kernels and one of 4 0.44 ms on
  /// the 4-row ones, against 0.51 on the few-row products; at 8 sequences
  /// the 8-row kernels took 0.88 ms against the few-row products' 0.50.
  int decode_kernel_rows = 4;
  /// Decode steps of 2 to this many sequences (at most 16) that do not run
  /// the decode-step kernels run the few-row kernels (ops::FewRowsQkv,
  /// ops::FewRowsNormLinear, ops::FewRowsLinear: the [N, K] weight copies
  /// streamed as the tensor cores' wide operand, split along K, with the
  /// layernorms and the cache write fused); 0: the prefill kernels. 16-bit
  /// precisions only (fp32 steps run the prefill kernels).
  int few_row_products = 16;
  /// Those steps run the layernorms inside the few-row kernels (QKV with the
  /// cache write, MLP up, the LM head: 5 launches a layer); false (the
  /// default, faster on an H200: 0.44 against 0.62 ms a batch-8 step of
  /// 124M, bench/README.md): each layernorm and the cache write are
  /// launches of their own (8 a layer).
  bool few_row_fusion = false;
  /// Decode steps of more sequences than few_row_products, up to this many
  /// (at most 64), run their products (all but the LM head's) on
  /// ops::FewRowsLinear with 32 or 64 rows: the [N, K] weight copies
  /// streamed in panels loaded before each kernel waits on the one before
  /// it, split along K; 0: the prefill products, whose tiles give GPT-2
  /// 124M's 3072 -> 768 product 24 programs at 64 rows. 16-bit precisions
  /// only. 32 by default: on an H100 the batch-32 step of 124M took 0.82 ms
  /// with them against 0.92 without, the batch-64 step 1.23 against 1.20
  /// (bench/README.md).
  int many_row_products = 32;
  /// Each product of a decode step that runs a decode-step kernel
  /// (ops::DecodeLinear, ops::DecodeQkv) or a few-row kernel brings the
  /// next product's weight into L2 while it runs (kiln.prefetch): QKV the
  /// projection's, and so on; the last block's MLP down the first 24 MB of
  /// wte, which the LM head reads at batch 1 and on the few-row kernels
  /// (steps whose head runs the prefill product read wte transposed, and
  /// gain nothing from it). The first block's QKV weight is not prefetched.
  bool prefetch_weights = false;
  /// Decode steps of up to this many sequences (0, 1 or 2, and no more than
  /// decode_kernel_rows) run each layer's MLP as one launch
  /// (ops::DecodeMlp: layernorm, up, gelu, down, bias and residual) instead
  /// of two decode-step products. 16-bit precisions only. 0 by default: on
  /// an H100 the batch-1 step of 124M took 0.315 ms with it against 0.254
  /// without (bench/README.md).
  int fused_mlp_rows = 0;
  /// Untuned decode steps of one sequence that attends to at most this many
  /// keys (its length bucket: the next power of two from 128) run decode
  /// attention over the 4 programs of a thread-block cluster with the keys
  /// and values of their first blocks (256 keys at head_dim 64) loaded
  /// before the kernel waits on the QKV kernel
  /// (ops::AttentionDecodeResident; GPUs with clusters, and the CPU);
  /// longer contexts and batches the split kernels (on an H100 the batch-1
  /// step of 124M took 0.249 ms with it against 0.261 without at prompt 64,
  /// 0.278 against 0.288 at prompt 256; batch-8 steps were 1-6% slower with
  /// it). 0: the split kernels at every length.
  int resident_attention_keys = 512;
};

/// torch.compile's modes, kiln's way:
///   default          cached or heuristic configurations, kernels launched one by one
///   reduce-overhead  the same, each decode step replayed as one CUDA graph
///   max-autotune     every prefill product tuned for this GPU and each new
///                    prompt shape (persisted), then CUDA graphs
enum class Mode { Default, ReduceOverhead, MaxAutotune };
Mode parse_mode(const std::string &name); ///< "default", "reduce-overhead", "max-autotune"
std::string to_string(Mode m);
/// `options` with the graphs and tuning of `mode`.
ModelOptions apply_mode(Mode mode, ModelOptions options);

struct GenerateOptions {
  int max_new_tokens = 64;
  bool stop_at_eot = true;
  int32_t eot = 50256;
  /// 0: greedy. Otherwise tokens are drawn on the device from
  /// softmax(logits / temperature), limited to the top_k largest (0: all)
  /// and then to the smallest set whose probability reaches top_p.
  /// Temperatures below 1e-30 (1e-40 is a float) sample as 1e-30 does:
  /// the greedy limit, ties drawn at random.
  float temperature = 0;
  int top_k = 0;
  float top_p = 1;
  int32_t seed = 0;
};

/// What the model compiled and how it runs (`kiln-gpt2 --explain`).
struct Explain {
  struct KernelInfo {
    std::string name, role; ///< the name carries the block sizes
    double compile_seconds;
    bool from_cache;
    int num_warps, num_stages;
    std::string source; ///< "heuristic", "tuned" or "tuning cache"
  };
  std::vector<KernelInfo> kernels;
  int launches_per_decode_step = 0;
  int launches_per_prefill = 0;
  bool decode_graph = false;
  int graph_replays = 0;
  /// Decode-step graphs captured: one per attention length bucket with a
  /// tuned decode attention, one for all the buckets without.
  int graph_captures = 0;
  double compile_seconds = 0;
  double prepare_seconds = 0; ///< wall time converting, transposing and copying the weights
  double kernels_seconds = 0; ///< wall time getting every kernel ready (compile or cache)
  double tuning_seconds = 0;  ///< compiling and timing candidates, or reading winners back
};

/// Where the time of one decode step goes (Model::profile_decode).
struct StepProfile {
  struct Kernel {
    std::string role;
    int launches;     ///< per step
    double us;        ///< per step, all launches of this role together
    /// What the step's graph takes longer with this role's launches than
    /// without them (the graph captured again without them): their share
    /// of the step where each overlaps with the kernels around it (0
    /// without graphs).
    double graph_us = 0;
  };
  std::vector<Kernel> kernels; ///< slowest first
  double kernels_us = 0;       ///< sum over kernels, each launched on its own
  double graph_us = 0;         ///< one replay of the captured step (0 without graphs)
  int launches = 0;
};

class Model {
public:
  Model(const Weights &weights, const Target &target, Precision precision,
        ModelOptions options = {});
  ~Model();
  Model(Model &&) noexcept;

  const Config &config() const;

  /// Logits [T, V] of every position of one prompt (sequence 0).
  std::vector<float> logits(const std::vector<int32_t> &tokens);

  /// Continuation of every prompt (greedy unless options.temperature > 0); `on_token(i, token)` is
  /// called as each new token of prompt i is known. Returns the new tokens per prompt.
  std::vector<std::vector<int32_t>>
  generate(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
           const std::function<void(int, int32_t)> &on_token = {});

  const Explain &explain() const;

  /// Prefills `prompts` and times `steps` greedy decode steps kernel by
  /// kernel (CUDA events around every launch), then replays of the step's
  /// CUDA graph. GPU only.
  StepProfile profile_decode(const std::vector<std::vector<int32_t>> &prompts, int steps = 20);

  struct Impl; ///< per-precision implementation (Model.cpp)

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::gpt2
