//===- fuzz_llmc.cpp - libFuzzer: the llm.c checkpoint reader -------------===//
#include "kiln/gpt2/weights.hpp"
#include "kiln/core/error.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    kiln::gpt2::Weights::from_llmc_bytes(
        std::string_view(reinterpret_cast<const char *>(data), size));
  } catch (const kiln::Error &) {
  }
  return 0;
}
