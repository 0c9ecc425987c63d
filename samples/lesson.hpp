//===- lesson.hpp - command line shared by the numbered lessons -----------===//
//
// Every lesson accepts:
//   --ir=STAGES   comma-separated stages to print: kiln, lowered, llvm-dialect,
//                 llvm, ptx (GPU targets), or all (default: kiln)
//   --no-ir       print no IR
//   --help
// Unknown flags are an error (exit 2); failures at run time exit 1.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/kiln.hpp"
#include "kiln/runtime/tool.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lesson {

struct Options {
  std::vector<kiln::Stage> stages{kiln::Stage::Kiln};
};

/// Parses the lesson's flags; mistakes throw kiln::tool::UsageError.
/// Returns nullopt when --help was printed.
inline std::optional<Options> parse(int argc, char **argv, const char *what) {
  Options o;
  std::string ir;
  bool noIr = false;
  CLI::App app(what, argv[0]);
  app.add_option("--ir", ir, "comma-separated stages to print: kiln, lowered, llvm-dialect, "
                             "llvm, ptx (GPU targets), or all (default: kiln)");
  app.add_flag("--no-ir", noIr, "print no IR");
  if (!kiln::tool::parse(app, argc, argv))
    return std::nullopt;
  if (noIr)
    o.stages.clear();
  if (!ir.empty()) {
    o.stages.clear();
    if (ir == "all") {
      o.stages = {kiln::Stage::Kiln, kiln::Stage::Lowered, kiln::Stage::LLVMDialect,
                  kiln::Stage::LLVMIR, kiln::Stage::Ptx};
      return o;
    }
    std::string_view list = ir;
    while (!list.empty()) {
      auto comma = list.find(',');
      try {
        o.stages.push_back(kiln::parse_stage(list.substr(0, comma)));
      } catch (const kiln::Error &e) {
        throw kiln::tool::UsageError(e.what());
      }
      list = comma == std::string_view::npos ? "" : list.substr(comma + 1);
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

/// Runs a lesson body: usage errors exit 2, failures at run time 1, each
/// with one message.
template <class F> int run(int argc, char **argv, const char *what, F body) {
  std::string name = std::filesystem::path(argv[0]).filename().string();
  return kiln::tool::run(name.c_str(), [&] {
    std::optional<Options> o = parse(argc, argv, what);
    return o ? body(*o) : 0;
  });
}

} // namespace lesson
