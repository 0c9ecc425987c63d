//===- fuzz_config.cpp - libFuzzer: config.json ---------------------------===//
#include "kiln/gpt2/weights.hpp"
#include "kiln/core/error.hpp"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    kiln::gpt2::Config c = kiln::gpt2::parse_hf_config(
        std::string(reinterpret_cast<const char *>(data), size), "config.json");
    c.validate(); // what it returns must be a usable config
  } catch (const kiln::Error &) {
  }
  return 0;
}
