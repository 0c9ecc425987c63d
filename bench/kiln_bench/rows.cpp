//===- rows.cpp - kiln_bench: vector add, softmax, layernorm ---------------===//
#include "common.hpp"

using namespace kiln;
using namespace kiln::microbench;

namespace {

template <int BLOCK> void BM_vec_add(benchmark::State &state) {
  int n = int(state.range(0));
  auto x = random_device<kiln::half>(n), y = random_device<kiln::half>(n);
  cuda::DeviceBuffer<kiln::half> out(n);
  auto k = compile<ops::VecAdd<f16, BLOCK>>(gpu());
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { k.launch(Grid(ceil_div(n, BLOCK)), x.data(), y.data(), out.data(), n); });
    report(state, ms, 3.0 * n * 2, 0);
  }
}

template <int BLOCK, bool ONE> void BM_softmax(benchmark::State &state) {
  int rows = int(state.range(0)), cols = int(state.range(1));
  auto x = random_device<kiln::half>(std::size_t(rows) * cols);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(rows) * cols);
  CompileOptions o;
  o.num_warps = int(state.range(2));
  auto k = compile<ops::Softmax<f16, BLOCK, ONE>>(gpu(), o);
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { k.launch(Grid(rows), x.data(), y.data(), cols, cols, cols); });
    report(state, ms, 2.0 * rows * cols * 2, 0);
  }
}

/// A row over a cluster of CLUSTER programs (ops::SoftmaxCluster):
/// {rows, cols, warps}.
template <int BLOCK, int CLUSTER> void BM_softmax_cluster(benchmark::State &state) {
  int rows = int(state.range(0)), cols = int(state.range(1));
  if (!ops::softmax_cluster_fits<f16, BLOCK, CLUSTER>(cols)) {
    state.SkipWithError("the row does not fit the cluster");
    return;
  }
  auto x = random_device<kiln::half>(std::size_t(rows) * cols);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(rows) * cols);
  CompileOptions o;
  o.num_warps = int(state.range(2));
  auto k = compile<ops::SoftmaxCluster<f16, BLOCK, CLUSTER>>(gpu(), o);
  state.SetLabel("a row over a cluster of " + std::to_string(CLUSTER) + " programs of BLOCK " +
                 std::to_string(BLOCK) + ", " + std::to_string(state.range(2)) + " warps");
  for (auto _ : state) {
    double ms = cuda::time_ms([&] { k.launch(Grid(rows * CLUSTER), x.data(), y.data(), cols, cols, cols); });
    report(state, ms, 2.0 * rows * cols * 2, 0);
  }
}

template <int BLOCK, bool ONE> void BM_layernorm(benchmark::State &state) {
  int rows = int(state.range(0)), n = int(state.range(1));
  auto x = random_device<kiln::half>(std::size_t(rows) * n);
  auto w = random_device<kiln::half>(n), b = random_device<kiln::half>(n);
  cuda::DeviceBuffer<kiln::half> y(std::size_t(rows) * n);
  CompileOptions o;
  o.num_warps = int(state.range(2));
  auto k = compile<ops::LayerNorm<f16, BLOCK, ONE>>(gpu(), o);
  for (auto _ : state) {
    double ms = cuda::time_ms(
        [&] { k.launch(Grid(rows), x.data(), w.data(), b.data(), y.data(), n, n, 1e-5f); });
    report(state, ms, 2.0 * rows * n * 2, 0);
  }
}

/// A row-looping kernel (ops::SoftmaxRows, LayerNormRows) on a (rows, cols)
/// f16 input and output, from the benchmark's arguments {rows, cols, warps,
/// programs a multiprocessor (0: one program per block of ROWS rows)}.
template <class K, int ROWS, int BLOCK> struct RowsRun {
  int rows, cols;
  cuda::DeviceBuffer<kiln::half> x, y;
  Kernel<K> kernel;
  Grid grid;
  explicit RowsRun(benchmark::State &state)
      : rows(int(state.range(0))), cols(int(state.range(1))),
        x(random_device<kiln::half>(std::size_t(rows) * cols)), y(std::size_t(rows) * cols),
        kernel(compile<K>(gpu(), options(state))), grid(1) {
    int per_sm = int(state.range(3)), blocks = ceil_div(rows, ROWS);
    grid = Grid(per_sm > 0 ? std::min(blocks, per_sm * cuda::multiprocessor_count()) : blocks);
    state.SetLabel(std::to_string(ROWS) + " rows of BLOCK " + std::to_string(BLOCK) + ", " +
                   std::to_string(state.range(2)) + " warps, " +
                   (per_sm > 0 ? std::to_string(per_sm) + " programs an SM" : "a program per block of rows"));
  }
  static CompileOptions options(const benchmark::State &state) {
    CompileOptions o;
    o.num_warps = int(state.range(2));
    return o;
  }
  /// Times `launch(kernel, grid)`; the bandwidth counts x read and y written.
  template <class F> void time(benchmark::State &state, F launch) {
    for (auto _ : state) {
      double ms = cuda::time_ms([&] { launch(kernel, grid); });
      report(state, ms, 2.0 * rows * cols * 2, 0);
    }
  }
};

template <int ROWS, int BLOCK> void BM_softmax_rows(benchmark::State &state) {
  RowsRun<ops::SoftmaxRows<f16, ROWS, BLOCK>, ROWS, BLOCK> run(state);
  run.time(state, [&](auto &k, Grid g) {
    k.launch(g, run.x.data(), run.y.data(), run.rows, run.cols, run.cols, run.cols);
  });
}

/// Wide rows a row at a time over a grid of `programs an SM` times the SMs.
template <int BLOCK> void BM_softmax_wide(benchmark::State &state) {
  RowsRun<ops::SoftmaxWide<f16, BLOCK>, 1, BLOCK> run(state);
  state.SetLabel("wide rows a row at a time, BLOCK " + std::to_string(BLOCK) + ", " +
                 std::to_string(state.range(2)) + " warps, " + std::to_string(state.range(3)) + " programs an SM");
  run.time(state, [&](auto &k, Grid g) {
    k.launch(g, run.x.data(), run.y.data(), run.rows, run.cols, run.cols, run.cols);
  });
}

template <int ROWS, int BLOCK> void BM_layernorm_rows(benchmark::State &state) {
  RowsRun<ops::LayerNormRows<f16, ROWS, BLOCK>, ROWS, BLOCK> run(state);
  auto w = random_device<kiln::half>(run.cols), b = random_device<kiln::half>(run.cols);
  run.time(state, [&](auto &k, Grid g) {
    k.launch(g, run.x.data(), w.data(), b.data(), run.y.data(), run.rows, run.cols, run.cols, 1e-5f);
  });
}

} // namespace

BENCHMARK(BM_vec_add<2048>)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<1024, false>)->Args({8192, 4096, 4})->Args({8192, 4096, 8})
    ->Args({4096, 50257, 8})->Args({32768, 1024, 4})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<4096, true>)->Args({8192, 4096, 8})->Args({8192, 4096, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<1024, true>)->Args({32768, 1024, 4})->Args({32768, 1024, 8})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<4096, false>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax<8192, false>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// The whole 50257-wide row in one block, held in registers: one read, one
// write, but 64-128 values a thread spill (0.73-0.79 TB/s on an H100 against
// 1.69 for the two sweeps above; bench/README.md).
BENCHMARK(BM_softmax<65536, true>)->Args({4096, 50257, 32})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// A row over a thread-block cluster, read once: {rows, cols, warps}. Slower
// than the two sweeps (0.71-1.09 TB/s on an H100 against 1.69; bench/README.md).
BENCHMARK(BM_softmax_cluster<8192, 7>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_cluster<16384, 4>)->Args({4096, 50257, 16})->Args({4096, 50257, 32})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_cluster<8192, 8>)->Args({4096, 50257, 8})->Args({4096, 50257, 16})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_cluster<2048, 3>)->Args({8192, 4096, 4})->Args({8192, 4096, 8})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// Wide rows a row at a time: {rows, cols, warps, programs an SM}.
BENCHMARK(BM_softmax_wide<2048>)->Args({4096, 50257, 8, 1})->Args({4096, 50257, 8, 2})->Args({4096, 50257, 8, 4})
    ->Args({4096, 50257, 16, 1})->Args({4096, 50257, 16, 2})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_wide<4096>)->Args({4096, 50257, 16, 1})->Args({4096, 50257, 16, 2})
    ->Args({4096, 50257, 32, 1})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_wide<1024>)->Args({4096, 50257, 8, 2})->Args({4096, 50257, 8, 4})
    ->Args({8192, 4096, 8, 2})->Args({8192, 4096, 8, 4})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
// Short rows several at a time: {rows, cols, warps, programs an SM (0: a
// program per block of rows)}.
BENCHMARK(BM_softmax_rows<1, 4096>)->Args({8192, 4096, 8, 0})->Args({8192, 4096, 8, 4})
    ->Args({8192, 4096, 16, 2})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<2, 4096>)->Args({8192, 4096, 8, 2})->Args({8192, 4096, 16, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<2, 1024>)->Args({32768, 1024, 4, 0})->Args({32768, 1024, 4, 8})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<4, 1024>)->Args({32768, 1024, 4, 0})->Args({32768, 1024, 4, 4})
    ->Args({32768, 1024, 8, 4})->Args({32768, 1024, 4, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_softmax_rows<8, 1024>)->Args({32768, 1024, 8, 2})->Args({32768, 1024, 8, 4})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<4, 1024>)->Args({8192, 768, 4, 0})->Args({8192, 768, 4, 4})
    ->Args({8192, 768, 4, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<4, 768>)->Args({8192, 768, 4, 0})->Args({8192, 768, 4, 4})
    ->Args({8192, 768, 4, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<8, 768>)->Args({8192, 768, 8, 2})->Args({8192, 768, 8, 4})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<1, 4096>)->Args({32768, 4096, 8, 0})->Args({32768, 4096, 8, 4})
    ->Args({32768, 4096, 16, 2})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm_rows<2, 4096>)->Args({32768, 4096, 8, 2})->Args({32768, 4096, 16, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm<1024, true>)->Args({8192, 768, 4})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_layernorm<1024, false>)->Args({32768, 4096, 8})->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(1);
