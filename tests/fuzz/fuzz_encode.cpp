//===- fuzz_encode.cpp - libFuzzer: GPT-2's tokenizer on any bytes --------===//
//
// With the real vocabulary: encoding never fails, every id is in the
// vocabulary, and decoding gives back exactly the bytes encoded.
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/tokenizer.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace {
std::unique_ptr<kiln::gpt2::Tokenizer> tok;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *dir = std::getenv("KILN_GPT2_VOCAB");
  tok = std::make_unique<kiln::gpt2::Tokenizer>(
      kiln::gpt2::Tokenizer::from_dir(dir ? dir : KILN_GPT2_VOCAB_DIR));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  std::vector<int32_t> ids = tok->encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tok->vocab_size()) {
      std::fprintf(stderr, "id %d outside the vocabulary\n", id);
      std::abort();
    }
  if (tok->decode(ids) != text) {
    std::fprintf(stderr, "decode(encode(x)) != x\n");
    std::abort();
  }
  return 0;
}
