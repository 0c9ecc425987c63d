//===- config.hpp - GPT-2 model shapes -------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace kiln::gpt2 {

struct Config {
  int n_layer = 12, n_head = 12, n_embd = 768;
  int vocab_size = 50257, n_ctx = 1024;

  /// Limits validate() enforces: far above any GPT-2 (1.5B: 48 layers, 1600
  /// wide), low enough that sizes derived from them cannot overflow.
  static constexpr int kMaxLayers = 1024, kMaxEmbd = 1 << 16, kMaxVocab = 1 << 22,
                       kMaxCtx = 1 << 20;

  int head_dim() const { return n_embd / n_head; }
  /// Parameters, counting the tied embedding once.
  int64_t num_params() const;
  std::string describe() const;

  /// "124M", "355M", "774M", "1.5B"; anything else throws kiln::Error listing them.
  static Config preset(const std::string &name);
  /// Throws kiln::Error unless the shapes are usable (head_dim a power of two
  /// in [16, 128], n_embd divisible by n_head, every size within the limits).
  void validate() const;
};

} // namespace kiln::gpt2
