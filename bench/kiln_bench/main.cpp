//===- main.cpp - kiln_bench: per-kernel GPU microbenchmarks --------------===//
//
// Runs the benchmarks of rows.cpp, products.cpp and decode.cpp (see
// common.hpp) on this machine's GPU.
//
//===----------------------------------------------------------------------===//
#include "common.hpp"

using namespace kiln;

int main(int argc, char **argv) {
  return tool::run("kiln_bench", [&] {
    std::string why;
    if (!cuda::available(&why))
      throw Error("no GPU: " + why);
    // On stderr and in the JSON context: stdout is the benchmark report.
    std::fprintf(stderr, "device: %s\n", cuda::device_name().c_str());
    benchmark::AddCustomContext("device", cuda::device_name());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
      return 2;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  });
}
