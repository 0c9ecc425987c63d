//===- fuzz_tokenizer_files.cpp - libFuzzer: vocabulary and merges --------===//
//
// The input is a vocabulary (JSON), a NUL byte, then merges. A tokenizer
// that loads must then encode and decode its own kind of text without
// failing: byte-level BPE covers every byte.
//
//===----------------------------------------------------------------------===//
#include "kiln/gpt2/tokenizer.hpp"
#include "kiln/core/error.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string in(reinterpret_cast<const char *>(data), size);
  auto nul = in.find('\0');
  if (nul == std::string::npos)
    return 0;
  std::optional<kiln::gpt2::Tokenizer> tok;
  try {
    tok.emplace(kiln::gpt2::Tokenizer::from_text(in.substr(0, nul), in.substr(nul + 1)));
  } catch (const kiln::Error &) {
    return 0;
  }
  const std::string text = "hello world, hello  wide\tworld 123 <|endoftext|> \xff\xfe";
  try {
    if (tok->decode(tok->encode(text)) != text) {
      std::fprintf(stderr, "decode(encode(x)) != x\n");
      std::abort();
    }
  } catch (const kiln::Error &) {
    // A vocabulary missing a merge's result is reported when it is used.
  }
  return 0;
}
