//===- main.cpp - the tests' main, for the host or (KILN_TEST_GPU) the GPU --===//
//
// Every doctest binary links this file. Built with KILN_TEST_GPU, it makes
// the binary run the shared numeric and GPT-2 tests on the GPU and leaves
// out the test suite "cpu-only"; built without, it runs them on the host and
// leaves out "gpu-only".
//
//===----------------------------------------------------------------------===//
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

namespace kiln::test {
bool on_gpu() {
#ifdef KILN_TEST_GPU
  return true;
#else
  return false;
#endif
}
} // namespace kiln::test

int main(int argc, char **argv) {
  doctest::Context context;
  context.addFilter("test-suite-exclude", kiln::test::on_gpu() ? "cpu-only" : "gpu-only");
  context.applyCommandLine(argc, argv);
  return context.run();
}
