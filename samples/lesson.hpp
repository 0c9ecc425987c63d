//===- lesson.hpp - command line shared by the numbered lessons -----------===//
//
// Every lesson accepts:
//   --ir=STAGES   comma-separated stages to print: kiln, lowered, llvm-dialect,
//                 llvm, ptx (GPU targets), or all (default: kiln)
//   --no-ir       print no IR
//   --help
// Unknown flags are an error (exit 2).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"

#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace lesson {

struct Options {
  std::vector<kiln::Stage> stages{kiln::Stage::Kiln};
};

inline Options parse(int argc, char **argv, const char *what) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s\n\nusage: %s [--ir=kiln,lowered,llvm-dialect,llvm,ptx|all] [--no-ir]\n", what,
                  argv[0]);
      std::exit(0);
    } else if (a == "--no-ir") {
      o.stages.clear();
    } else if (a.starts_with("--ir=")) {
      o.stages.clear();
      std::string_view list = a.substr(5);
      if (list == "all") {
        o.stages = {kiln::Stage::Kiln, kiln::Stage::Lowered, kiln::Stage::LLVMDialect,
                    kiln::Stage::LLVMIR, kiln::Stage::Ptx};
        continue;
      }
      while (!list.empty()) {
        auto comma = list.find(',');
        o.stages.push_back(kiln::parse_stage(list.substr(0, comma)));
        list = comma == std::string_view::npos ? "" : list.substr(comma + 1);
      }
    } else {
      throw kiln::Error("unknown flag '" + std::string(a) + "' (try --help)");
    }
  }
  return o;
}

inline void show_ir(const Options &o, const kiln::CompiledKernel &k) {
  for (kiln::Stage s : o.stages) {
    if (s == kiln::Stage::Ptx && k.target().kind == kiln::Target::Kind::Cpu)
      continue; // `all` on a CPU kernel: there is no PTX
    std::cout << "\n===== " << k.name() << ": " << kiln::to_string(s) << " =====\n"
              << k.ir(s) << "\n";
  }
}

/// Runs a lesson body, turning errors into one message and a non-zero exit.
template <class F> int run(int argc, char **argv, const char *what, F body) {
  try {
    Options o = parse(argc, argv, what);
    return body(o);
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

} // namespace lesson
