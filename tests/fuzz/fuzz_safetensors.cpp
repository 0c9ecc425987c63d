//===- fuzz_safetensors.cpp - libFuzzer: the safetensors reader -----------===//
//
// Any bytes are either a model of the fixed small config below or one
// kiln::Error; anything else (a crash, a sanitizer report, another
// exception escaping) is a finding.
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/weights.hpp"
#include "kiln/core/error.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::gpt2::Config c; // the seeds' shape (tests/fuzz/make_seeds.py)
  c.n_layer = 1, c.n_head = 1, c.n_embd = 16, c.vocab_size = 8, c.n_ctx = 4;
  try {
    kiln::gpt2::Weights::from_safetensors_bytes(
        std::string_view(reinterpret_cast<const char *>(data), size), c);
  } catch (const kiln::Error &) {
  }
  return 0;
}
