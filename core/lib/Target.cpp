//===- Target.cpp - names of compilation stages ---------------------------===//
#include "kiln/core/target.hpp"
#include "kiln/core/error.hpp"

#include <string>

namespace kiln {

std::string_view to_string(Stage s) {
  switch (s) {
  case Stage::Kiln: return "kiln";
  case Stage::Lowered: return "lowered";
  case Stage::LLVMDialect: return "llvm-dialect";
  case Stage::LLVMIR: return "llvm";
  case Stage::Ptx: return "ptx";
  }
  return "?";
}

Stage parse_stage(std::string_view s) {
  for (Stage st : {Stage::Kiln, Stage::Lowered, Stage::LLVMDialect, Stage::LLVMIR, Stage::Ptx})
    if (to_string(st) == s)
      return st;
  throw Error("kiln: unknown IR stage '" + std::string(s) +
              "' (expected kiln, lowered, llvm-dialect, llvm or ptx)");
}

} // namespace kiln
