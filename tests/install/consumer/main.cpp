//===- main.cpp - a kiln kernel in a program that uses an installed kiln --===//
//
// Writes a kernel in the DSL, compiles it for the host CPU, launches it and
// checks every element; exits with 1 on a mismatch or an error.
//
//===----------------------------------------------------------------------===//
#include "kiln/kiln.hpp"

#include <cstdio>
#include <vector>

using namespace kiln;

/// out = a * x + y
template <int BLOCK> struct Axpy {
  void operator()(Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, F32 a, I32 n) const {
    auto offs = program_id(0) * BLOCK + arange<BLOCK>(); // (BLOCK) element indices
    auto mask = offs < n;                                 // (BLOCK) in-bounds lanes
    store(out + offs, a * load(x + offs, mask) + load(y + offs, mask), mask);
  }
};

int main() {
  try {
    CompileOptions options;
    options.use_cache = false; // a test leaves the user's kernel cache alone
    auto k = compile<Axpy<128>>(Target::cpu(), options);
    const int n = 1000; // not a multiple of the block
    std::vector<float> x(n), y(n), out(n, -1.f);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i);
      y[i] = float(n - i);
    }
    k.launch(Grid(ceil_div(n, 128)), x.data(), y.data(), out.data(), 2.0f, n);
    int bad = 0;
    for (int i = 0; i < n; ++i)
      if (out[i] != 2.0f * x[i] + y[i] && bad++ < 5)
        std::fprintf(stderr, "out[%d] = %g, expected %g\n", i, out[i], 2.0f * x[i] + y[i]);
    std::printf("kiln_consumer: %s of %d elements: %d wrong\n", k.name().c_str(), n, bad);
    return bad == 0 ? 0 : 1;
  } catch (const Error &e) {
    std::fprintf(stderr, "kiln_consumer: %s\n", e.what());
    return 1;
  }
}
