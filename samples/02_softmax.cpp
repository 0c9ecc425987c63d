//===- 02_softmax.cpp - lesson 2: reductions and numerically safe softmax -===//
//
// What this teaches: reductions (`max`, `sum`) turn a tile into a scalar that
// broadcasts back over the tile; masked lanes load a fill value (-inf here)
// that cannot win the max and contributes exp(-inf) = 0 to the sum; math runs
// in f32 even when memory holds f16 (`cast<f32>` on load, `cast<f16>` on store).
//
//===----------------------------------------------------------------------===//
#include "lesson.hpp"

#include <cmath>

using namespace kiln;

template <int BLOCK> struct RowSoftmax {
  void operator()(Ptr<f16> x, Ptr<f16> y, I32 n_cols, I32 stride) const {
    auto row = program_id(0);
    auto cols = arange<BLOCK>();                       // (BLOCK)
    auto mask = cols < n_cols;
    auto v = cast<f32>(load(x + row * stride + cols, mask, -inf));
    auto e = exp(v - max(v));                          // max(v): scalar, broadcast back
    store(y + row * stride + cols, cast<f16>(e / sum(e)), mask);
  }
};

int main(int argc, char **argv) {
  return lesson::run(argc, argv, "lesson 2: row softmax", [](const lesson::Options &o) {
    auto k = compile<RowSoftmax<1024>>(Target::cpu());
    const int rows = 4, cols = 1000;
    std::vector<half> x(rows * cols), y(rows * cols);
    for (int i = 0; i < rows * cols; ++i)
      x[i] = half(float((i * 37) % 101) / 10.f);
    k.launch(Grid(rows), x.data(), y.data(), cols, cols);
    double worst = 0;
    for (int r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0, row_sum = 0;
      for (int c = 0; c < cols; ++c)
        m = std::max(m, double(float(x[r * cols + c])));
      for (int c = 0; c < cols; ++c)
        s += std::exp(double(float(x[r * cols + c])) - m);
      for (int c = 0; c < cols; ++c) {
        double want = std::exp(double(float(x[r * cols + c])) - m) / s;
        worst = std::max(worst, std::fabs(double(float(y[r * cols + c])) - want));
        row_sum += float(y[r * cols + c]);
      }
      std::printf("row %d: sum of probabilities = %.4f\n", r, row_sum);
    }
    std::printf("max abs error vs a double reference: %.2e\n", worst);
    lesson::show_ir(o, k);
    return worst < 1e-3 ? 0 : 1;
  });
}
