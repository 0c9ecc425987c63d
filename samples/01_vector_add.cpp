//===- 01_vector_add.cpp - lesson 1: programs, ranges, masks --------------===//
//
// What this teaches: a kernel is a C++ callable run once per *program* of a
// grid. `program_id(0)` says which program this is, `arange<BLOCK>()` is a
// tile of lane indices, and a mask (`offs < n`) keeps the last, partial block
// from touching memory past the end. Block sizes are template parameters;
// the problem size `n` is a runtime argument, so one compiled kernel serves
// every n.
//
//===----------------------------------------------------------------------===//
#include "lesson.hpp"

#include <cmath>

using namespace kiln;

template <int BLOCK> struct VectorAdd {
  void operator()(Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n) const {
    auto offs = program_id(0) * BLOCK + arange<BLOCK>(); // (BLOCK) element indices
    auto mask = offs < n;                                 // (BLOCK) in-bounds lanes
    store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
  }
};

int main(int argc, char **argv) {
  return lesson::run(argc, argv, "lesson 1: vector add", [](const lesson::Options &o) {
    auto k = compile<VectorAdd<256>>(Target::cpu());
    const int n = 1000; // not a multiple of the block: the mask matters
    std::vector<float> x(n), y(n), out(n, 0.f);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i);
      y[i] = 0.5f * float(i);
    }
    k.launch(Grid(ceil_div(n, 256)), x.data(), y.data(), out.data(), n);
    int bad = 0;
    for (int i = 0; i < n; ++i)
      bad += out[i] != 1.5f * float(i);
    std::printf("vector add of %d elements on %d programs: out[999] = %.1f, %d wrong\n", n,
                int(ceil_div(n, 256)), out[n - 1], bad);
    std::printf("compiled in %.0f ms\n", k.compile_seconds() * 1e3);
    lesson::show_ir(o, k);
    return bad == 0 ? 0 : 1;
  });
}
