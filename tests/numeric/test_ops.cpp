//===- test_ops.cpp - the kernel library against its references ----------===//
//
// Compiled once, linked twice: for the CPU (kiln_cpu_numeric_tests) and for
// the GPU of the machine it runs on (kiln_gpu_tests, ctest label gpu).
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include <cmath>

#include "support/check.hpp"
#include "support/target.hpp"
#include "kiln/ops/attention.hpp"
#include "kiln/ops/decoder.hpp"
#include "kiln/ops/gemv.hpp"
#include "kiln/ops/layernorm.hpp"
#include "kiln/ops/matmul.hpp"
#include "kiln/ops/reference.hpp"
#include "kiln/ops/softmax.hpp"
#include "kiln/runtime/cuda.hpp"

#include <memory>

using namespace kiln;

namespace {
using test::target;
/// The target under test, looked up when a test first compiles a kernel (not
/// at start-up, so that listing and filtering tests works with no GPU).
struct TargetUnderTest {
  operator const Target &() const { return target(); }
} const kCpu;

/// A host vector mirrored on the device when testing the GPU.
template <class T> struct Mem {
  std::vector<T> &host;
  std::unique_ptr<cuda::DeviceBuffer<T>> dev;
  explicit Mem(std::vector<T> &h) : host(h) {
    if (test::on_gpu())
      dev = std::make_unique<cuda::DeviceBuffer<T>>(h);
  }
  T *operator()() const { return dev ? dev->data() : host.data(); }
  std::vector<T> &fetch() {
    if (dev)
      host = dev->download();
    return host;
  }
};

template <class T> void check(const std::vector<T> &got, const std::vector<double> &want,
                              double atol, double rtol) {
  auto c = test::compare(got, want, atol, rtol);
  INFO(c.report);
  CHECK(c.ok());
}
} // namespace

namespace {
/// README's kernel whose row count is data: BN is a tile shape (a type),
/// rows a field fixed when the kernel is traced.
template <int BN> struct RowsScaled {
  int rows = 1;
  std::string config() const { return "r" + std::to_string(rows); }
  void operator()(Ptr<f32> x, Ptr<f32> y) const {
    auto cols = program_id(0) * BN + arange<BN>();
    for (int r = 0; r < rows; ++r) // unrolled while tracing
      store(y + r * 1024 + cols, load(x + r * 1024 + cols) * float(r + 1));
  }
};
} // namespace

TEST_CASE("a kernel object's fields configure it: one type, a kernel per configuration") {
  auto two = compile(kCpu, {}, RowsScaled<256>{.rows = 2});
  auto four = compile(kCpu, {}, RowsScaled<256>{.rows = 4});
  CHECK(two.name() == "RowsScaled_256_r2");
  CHECK(four.name() == "RowsScaled_256_r4");
  CHECK(four.object().rows == 4);
  auto x = test::random_vector<float>(4 * 1024, 3);
  std::vector<float> y2(4 * 1024, -1.f), y4(4 * 1024, -1.f);
  Mem dx(x);
  Mem d2(y2);
  Mem d4(y4);
  two.launch(Grid(1024 / 256), dx(), d2());
  four.launch(Grid(1024 / 256), dx(), d4());
  std::vector<double> want2(y2.size(), -1.0), want4(y4.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    want4[i] = double(x[i] * float(i / 1024 + 1)); // one f32 product, as the kernel
    if (i < 2 * 1024)
      want2[i] = want4[i]; // rows past 2 untouched
  }
  check(d2.fetch(), want2, 0, 0);
  check(d4.fetch(), want4, 0, 0);
}

TEST_CASE_TEMPLATE("vec_add matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  auto k = compile<ops::VecAdd<D, 256>>(kCpu);
  for (int n : {1, 255, 256, 1000, 4097}) {
    CAPTURE(n);
    auto x = test::random_vector<T>(n, 1), y = test::random_vector<T>(n, 2);
    std::vector<T> out(n, T(-7.0f));
    Mem dx(x);
    Mem dy(y);
    Mem dout(out);
    k.launch(Grid(ceil_div(n, 256)), dx(), dy(), dout(), n);
    double tol = std::is_same_v<T, half> ? 2e-3 : 1e-6;
    check(dout.fetch(), ref::vec_add(x, y), tol, tol);
  }
}

TEST_CASE_TEMPLATE("softmax matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  double tol = std::is_same_v<T, half> ? 2e-3 : 1e-6;
  auto looped = compile<ops::Softmax<D, 128>>(kCpu);
  auto one_pass = compile<ops::Softmax<D, 512, true>>(kCpu);
  auto by_rows = compile<ops::SoftmaxRows<D, 4, 512>>(kCpu);
  auto wide = compile<ops::SoftmaxWide<D, 128>>(kCpu);
  auto cluster = compile<ops::SoftmaxCluster<D, 128, 8>>(kCpu);
  for (auto [rows, cols] : {std::pair{1, 1}, {3, 100}, {4, 128}, {5, 300}, {2, 512}, {7, 1000}, {3, 1001}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    auto x = test::random_vector<T>(std::size_t(rows) * cols, 3, -8, 8);
    auto want = ref::softmax(x, rows, cols);
    std::vector<T> y(x.size(), T(-1.0f)), y2 = y;
    Mem dx(x);
    Mem dy(y);
    Mem dy2(y2);
    looped.launch(Grid(rows), dx(), dy(), cols, cols, cols);
    check(dy.fetch(), want, tol, tol);
    // Wide rows a row at a time: one program for everything, two taking
    // turns, one per row, more programs than rows.
    for (int programs : {1, 2, rows, rows + 3}) {
      CAPTURE(programs);
      std::vector<T> yw(x.size(), T(-1.0f));
      Mem dyw(yw);
      wide.launch(Grid(programs), dx(), dyw(), rows, cols, cols, cols);
      check(dyw.fetch(), want, tol, tol);
    }
    // A row over a cluster of 8 programs.
    REQUIRE(ops::softmax_cluster_fits<D, 128, 8>(cols));
    std::vector<T> yc(x.size(), T(-1.0f));
    Mem dyc(yc);
    cluster.launch(Grid(rows * 8), dx(), dyc(), cols, cols, cols);
    check(dyc.fetch(), want, tol, tol);
  }
}

TEST_CASE_TEMPLATE("softmax of rows with their own strides", T, float, half) {
  // Odd strides: most rows start off a 16-byte boundary, where the looped
  // variant starts its sweeps before column 0.
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  double tol = std::is_same_v<T, half> ? 2e-3 : 1e-6;
  auto looped = compile<ops::Softmax<D, 64>>(kCpu);
  auto by_rows = compile<ops::SoftmaxRows<D, 2, 256>>(kCpu);
  auto wide = compile<ops::SoftmaxWide<D, 64>>(kCpu);
  auto cluster = compile<ops::SoftmaxCluster<D, 64, 4>>(kCpu);
  const int rows = 9, cols = 201, xs = 211, ys = 203;
  REQUIRE(ops::softmax_cluster_fits<D, 64, 4>(cols));
  auto x = test::random_vector<T>(std::size_t(rows) * xs, 7, -8, 8);
  std::vector<T> packed;
  for (int r = 0; r < rows; ++r)
    packed.insert(packed.end(), x.begin() + r * xs, x.begin() + r * xs + cols);
  auto want = ref::softmax(packed, rows, cols);
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    std::vector<T> y(std::size_t(rows) * ys, T(-1.0f));
    Mem dx(x);
    Mem dy(y);
    if (variant == 0)
      looped.launch(Grid(rows), dx(), dy(), cols, xs, ys);
    else if (variant == 1)
      by_rows.launch(Grid(3), dx(), dy(), rows, cols, xs, ys);
    else if (variant == 2)
      wide.launch(Grid(4), dx(), dy(), rows, cols, xs, ys);
    else
      cluster.launch(Grid(rows * 4), dx(), dy(), cols, xs, ys);
    auto got = dy.fetch();
    std::vector<T> inside;
    for (int r = 0; r < rows; ++r) {
      inside.insert(inside.end(), got.begin() + r * ys, got.begin() + r * ys + cols);
      // Nothing written between rows.
      for (int k = cols; k < ys; ++k)
        CHECK(float(got[std::size_t(r * ys + k)]) == -1.0f);
    }
    check(inside, want, tol, tol);
  }
}

TEST_CASE_TEMPLATE("softmax of non-finite rows is PyTorch's", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  // Both variants, with rows longer than one block for the looped one.
  auto looped = compile<ops::Softmax<D, 32>>(kCpu);
  auto one_pass = compile<ops::Softmax<D, 128, true>>(kCpu);
  auto by_rows = compile<ops::SoftmaxRows<D, 2, 128>>(kCpu);
  auto wide = compile<ops::SoftmaxWide<D, 32>>(kCpu);
  auto cluster = compile<ops::SoftmaxCluster<D, 32, 4>>(kCpu);
  const int cols = 100;
  const float inf = INFINITY, nan = NAN;
  std::vector<std::vector<float>> rows = {
      std::vector<float>(cols, -inf),                     // torch: all NaN
      [&] { std::vector<float> r(cols, -inf); r[70] = 1; r[3] = 1; return r; }(), // 0.5 twice
      [&] { std::vector<float> r(cols, 0.f); r[50] = inf; return r; }(),          // all NaN
      [&] { std::vector<float> r(cols, 0.f); r[99] = nan; return r; }(),          // all NaN
      [&] { std::vector<float> r(cols, 0.f); r[0] = -inf; return r; }(),          // 0, then 1/99
  };
  std::vector<T> x;
  for (auto &r : rows)
    for (float v : r)
      x.push_back(T(v));
  const int R = int(rows.size());
  std::vector<double> want(x.size());
  for (int r = 0; r < R; ++r) {
    auto &row = rows[std::size_t(r)];
    bool anyNan = false, anyPosInf = false, allNegInf = true;
    for (float v : row)
      anyNan |= std::isnan(v), anyPosInf |= v == inf, allNegInf &= v == -inf;
    double m = -INFINITY, sum = 0;
    for (float v : row)
      m = std::max(m, double(v));
    for (float v : row)
      sum += std::exp(double(v) - m);
    for (int c = 0; c < cols; ++c)
      want[std::size_t(r * cols + c)] = anyNan || anyPosInf || allNegInf
                                            ? NAN
                                            : std::exp(double(row[std::size_t(c)]) - m) / sum;
  }
  CHECK(want[std::size_t(1 * cols + 70)] == doctest::Approx(0.5));
  CHECK(want[std::size_t(4 * cols + 0)] == 0.0);
  double tol = std::is_same_v<T, half> ? 2e-3 : 1e-6;
  std::vector<T> y(x.size(), T(-1.0f)), y2 = y;
  Mem dx(x);
  Mem dy(y);
  Mem dy2(y2);
  looped.launch(Grid(R), dx(), dy(), cols, cols, cols);
  check(dy.fetch(), want, tol, tol);
  one_pass.launch(Grid(R), dx(), dy2(), cols, cols, cols);
  check(dy2.fetch(), want, tol, tol);
  std::vector<T> y3(x.size(), T(-1.0f));
  Mem dy3(y3);
  by_rows.launch(Grid(2), dx(), dy3(), R, cols, cols, cols);
  check(dy3.fetch(), want, tol, tol);
  std::vector<T> y4(x.size(), T(-1.0f));
  Mem dy4(y4);
  wide.launch(Grid(2), dx(), dy4(), R, cols, cols, cols);
  check(dy4.fetch(), want, tol, tol);
  std::vector<T> y5(x.size(), T(-1.0f));
  Mem dy5(y5);
  cluster.launch(Grid(R * 4), dx(), dy5(), cols, cols, cols);
  check(dy5.fetch(), want, tol, tol);
}

namespace {
/// Each program of a cluster of 4 gives a value of its own; out[p] gets
/// the cluster's sum, max and min of them, and the sum again after a
/// second round (exchanges reuse their storage).
struct ClusterValues {
  void operator()(Ptr<f32> out) const {
    auto p = program_id(0);
    F32 v = cast<f32>(p) * 0.5f - 3.0f;
    auto s = cluster_sum<4>(v);
    auto m = cluster_max<4>(v);
    auto n = cluster_min<4>(v);
    auto again = cluster_sum<4>(s + v);
    store(out + p * 4, s);
    store(out + p * 4 + 1, m);
    store(out + p * 4 + 2, n);
    store(out + p * 4 + 3, again);
  }
};
/// Each program of a cluster of 4 gives a scalar and an 8-element row; every
/// program gets all of them, by rank, then a second gather (after a
/// cluster_sum: the exchanges share their storage) of one scalar.
struct ClusterGatherValues {
  void operator()(Ptr<f32> out) const {
    auto p = program_id(0);
    F32 v = cast<f32>(p) * 0.5f - 3.0f;
    auto row = cast<f32>(arange<8>()) + cast<f32>(p) * 10.0f;
    auto [vs, rows] = cluster_gather<4>(v, row);
    auto total = cluster_sum<4>(v);
    auto [again] = cluster_gather<4>(total + v);
    auto base = out + p * (4 + 32 + 4);
    store(base + arange<4>(), vs);
    store(base + 4 + expand_dims<1>(arange<4>()) * 8 + expand_dims<0>(arange<8>()), rows);
    store(base + 36 + arange<4>(), again);
  }
};
/// The second program of each cluster makes one exchange more than the
/// first: not allowed.
struct ClusterUneven {
  void operator()(Ptr<f32> out) const {
    auto p = program_id(0);
    for_range(I32(0), p % 2 + 1, I32(1), [&](I32) { store(out + p, cluster_sum<2>(F32(1.0f))); });
  }
};
} // namespace

TEST_CASE("cluster reductions combine the values of a cluster's programs") {
  auto k = compile<ClusterValues>(kCpu);
  const int programs = 12;
  std::vector<float> out(programs * 4, -1.0f);
  Mem dout(out);
  k.launch(Grid(programs), dout());
  auto got = dout.fetch();
  for (int p = 0; p < programs; ++p) {
    CAPTURE(p);
    int first = p / 4 * 4;
    float s = 0, m = -INFINITY, n = INFINITY;
    for (int q = first; q < first + 4; ++q) {
      float v = float(q) * 0.5f - 3.0f;
      s += v, m = std::max(m, v), n = std::min(n, v);
    }
    float again = 0;
    for (int q = first; q < first + 4; ++q)
      again += s + (float(q) * 0.5f - 3.0f);
    CHECK(got[std::size_t(p * 4)] == s);
    CHECK(got[std::size_t(p * 4 + 1)] == m);
    CHECK(got[std::size_t(p * 4 + 2)] == n);
    CHECK(got[std::size_t(p * 4 + 3)] == again);
  }
  // The grid's x must be a multiple of the cluster size.
  CHECK_THROWS_WITH_AS(k.launch(Grid(6), dout()), doctest::Contains("must be a multiple of 4"), Error);
  // On the CPU, programs whose exchanges do not pair up are an error, not a
  // hang (on the GPU they are undefined: every program must reach them).
  if (!test::on_gpu()) {
    auto uneven = compile<ClusterUneven>(kCpu);
    std::vector<float> o(4, 0.0f);
    CHECK_THROWS_WITH_AS(uneven.launch(Grid(4), o.data()), doctest::Contains("different numbers of cluster exchanges"),
                         Error);
  }
}

TEST_CASE("cluster_gather gives every program of a cluster every program's values") {
  auto k = compile<ClusterGatherValues>(kCpu);
  const int programs = 8, each = 4 + 32 + 4;
  std::vector<float> out(programs * each, -1.0f);
  Mem dout(out);
  k.launch(Grid(programs), dout());
  auto got = dout.fetch();
  for (int p = 0; p < programs; ++p) {
    CAPTURE(p);
    int first = p / 4 * 4;
    float total = 0;
    for (int q = first; q < first + 4; ++q)
      total += float(q) * 0.5f - 3.0f;
    for (int r = 0; r < 4; ++r) {
      CAPTURE(r);
      int q = first + r;
      CHECK(got[std::size_t(p * each + r)] == float(q) * 0.5f - 3.0f);
      for (int i = 0; i < 8; ++i)
        CHECK(got[std::size_t(p * each + 4 + r * 8 + i)] == float(i) + float(q) * 10.0f);
      CHECK(got[std::size_t(p * each + 36 + r)] == total + (float(q) * 0.5f - 3.0f));
    }
  }
  CHECK_THROWS_WITH_AS(k.launch(Grid(6), dout()), doctest::Contains("must be a multiple of 4"), Error);
}

TEST_CASE_TEMPLATE("layernorm matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  double tol = std::is_same_v<T, half> ? 1e-2 : 1e-5;
  auto looped = compile<ops::LayerNorm<D, 128>>(kCpu);
  auto one_pass = compile<ops::LayerNorm<D, 1024, true>>(kCpu);
  auto by_rows = compile<ops::LayerNormRows<D, 4, 1024>>(kCpu);
  for (auto [rows, n] : {std::pair{1, 1}, {3, 100}, {4, 128}, {2, 768}, {3, 1000}, {9, 768}}) {
    CAPTURE(rows);
    CAPTURE(n);
    auto x = test::random_vector<T>(std::size_t(rows) * n, 4, -3, 5);
    auto w = test::random_vector<T>(n, 5), b = test::random_vector<T>(n, 6);
    auto want = ref::layernorm(x, w, b, rows, n, 1e-5);
    std::vector<T> y(x.size()), y2(x.size());
    Mem dx(x);
    Mem dw(w);
    Mem db(b);
    Mem dy(y);
    Mem dy2(y2);
    looped.launch(Grid(rows), dx(), dw(), db(), dy(), n, n, 1e-5);
    check(dy.fetch(), want, tol, tol);
    one_pass.launch(Grid(rows), dx(), dw(), db(), dy2(), n, n, 1e-5);
    check(dy2.fetch(), want, tol, tol);
    for (int programs : {1, 2, int(ceil_div(rows, 4))}) {
      CAPTURE(programs);
      std::vector<T> y3(x.size(), T(-1.0f));
      Mem dy3(y3);
      by_rows.launch(Grid(programs), dx(), dw(), db(), dy3(), rows, n, n, 1e-5);
      check(dy3.fetch(), want, tol, tol);
    }
  }
}

TEST_CASE_TEMPLATE("matmul and matmul+bias+gelu match the reference", T, float, half, bfloat16) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32,
                               std::conditional_t<std::is_same_v<T, half>, f16, bf16>>;
  auto mm = compile<ops::Matmul<D, 32, 32, 16>>(kCpu);
  auto mbg = compile<ops::MatmulBiasGelu<D, 32, 32, 16>>(kCpu);
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {32, 32, 16}, {33, 65, 17}, {64, 96, 128},
                         {70, 50, 100}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    auto a = test::random_vector<T>(std::size_t(M) * K, 7);
    auto b = test::random_vector<T>(std::size_t(K) * N, 8);
    auto bias = test::random_vector<T>(N, 9);
    double tol = std::is_same_v<T, half> ? 1e-2 : std::is_same_v<T, bfloat16> ? 4e-2 : 1e-5;
    std::vector<T> c(std::size_t(M) * N, T(-5.0f)), c2 = c;
    Mem da(a);
    Mem dbm(b);
    Mem dbias(bias);
    Mem dc(c);
    Mem dc2(c2);
    Grid grid(ceil_div(M, 32), ceil_div(N, 32));
    mm.launch(grid, da(), dbm(), dc(), M, N, K, K, N, N);
    check(dc.fetch(), ref::matmul(a, b, M, N, K), tol, tol);
    mbg.launch(grid, da(), dbm(), dbias(), dc2(), M, N, K, K, N, N);
    check(dc2.fetch(), ref::matmul(a, b, M, N, K, &bias), tol, tol);
  }
}

namespace {
/// C(M, N) = A(M, K) @ B(N, K)^T, a user's kernel: both operands are loaded
/// in the loop (so pipelined into rings), B transposed in place.
template <class T, int BM, int BN, int BK> struct MatmulNT {
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<f32> c, I32 M, I32 N, I32 K) const {
    auto rm = program_id(0) * BM + arange<BM>();
    auto rn = program_id(1) * BN + arange<BN>();
    auto rk = arange<BK>();
    auto rows = expand_dims<1>(rm), cols = expand_dims<1>(rn); // (BM, 1), (BN, 1)
    auto acc = for_range(0, K, BK, zeros<f32, BM, BN>(), [&](I32 k0, Tile<f32, BM, BN> acc) {
      auto k = expand_dims<0>(k0 + rk); // (1, BK)
      auto at = load(a + rows * K + k, (rows < M) & (k < K), 0);
      auto bt = load(b + cols * K + k, (cols < N) & (k < K), 0);
      return dot(at, trans(bt), acc);
    });
    auto out = expand_dims<0>(rn);
    store(c + rows * N + out, acc, (rows < M) & (out < N));
  }
};

/// Runs `Kernel` (BM x BN tiles) with `options` on the shapes below against
/// the f64 reference of A(M, K) @ B(K, N) (or B(N, K)^T for `nt`; with the
/// bias+gelu epilogue for `bias`).
template <class Kernel, class T, int BM, int BN, bool nt = false, bool bias = false>
void check_tiles(const CompileOptions &options) {
  auto k = compile<Kernel>(kCpu, options);
  // On sm_90a the operands arrive by TMA where every row stride is a
  // multiple of 16 bytes (K and N multiples of 8 here: {BM, BN, 64}, then
  // ragged M, N and K whose last tiles TMA fills with zeros), and by
  // cp.async in the kernel compiled without TMA otherwise.
  if (test::target().kind == Target::Kind::Cuda && test::target().arch == "sm_90a")
    CHECK(k.ir(Stage::Ptx).find("cp.async.bulk.tensor") != std::string::npos);
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {BM, BN, 64}, {BM + 3, 2 * BN - 8, 200}, {70, 56, 136},
                         {3 * BM + 5, BN + 8, 64}, {BM + 3, 2 * BN - 5, 200}, {70, 50, 136}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    auto a = test::random_vector<T>(std::size_t(M) * K, 71);
    auto b = test::random_vector<T>(std::size_t(K) * N, 72);
    std::vector<T> bkn = b; // (K, N) for the reference
    if (nt)
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < N; ++j)
          bkn[std::size_t(i) * N + j] = b[std::size_t(j) * K + i];
    auto bv = test::random_vector<T>(N, 73);
    double tol = std::is_same_v<T, half> ? 1e-2 : 4e-2;
    Mem da(a);
    Mem db(b);
    Mem dbias(bv);
    Grid grid(ceil_div(M, BM), ceil_div(N, BN));
    if constexpr (nt) {
      std::vector<float> c(std::size_t(M) * N, -5.f);
      Mem dc(c);
      k.launch(grid, da(), db(), dc(), M, N, K);
      check(dc.fetch(), ref::matmul(a, bkn, M, N, K), tol, tol);
    } else {
      std::vector<T> c(std::size_t(M) * N, T(-5.0f));
      Mem dc(c);
      if constexpr (bias) {
        k.launch(grid, da(), db(), dbias(), dc(), M, N, K, K, N, N);
        check(dc.fetch(), ref::matmul(a, b, M, N, K, &bv), tol, tol);
      } else {
        k.launch(grid, da(), db(), dc(), M, N, K, K, N, N);
        check(dc.fetch(), ref::matmul(a, b, M, N, K), tol, tol);
      }
    }
  }
}
} // namespace

TEST_CASE_TEMPLATE("tensor-core tiles (wgmma on sm_90a) match the reference on ragged shapes", T, half,
                   bfloat16) {
  using D = std::conditional_t<std::is_same_v<T, half>, f16, bf16>;
  CompileOptions w8, w4;
  w8.num_warps = 8;
  w8.num_stages = 3;
  w4.num_warps = 4;
  w4.num_stages = 4;
  SUBCASE("128x128, two warpgroups") { check_tiles<ops::Matmul<D, 128, 128, 64>, T, 128, 128>(w8); }
  SUBCASE("128x256, K in steps of 64") { check_tiles<ops::Matmul<D, 128, 256, 64>, T, 128, 256>(w8); }
  SUBCASE("tiles in groups of 3 tile rows (the last group shorter)") {
    check_tiles<ops::GroupedMatmul<D, 64, 64, 64, 3>, T, 64, 64>(w4);
    check_tiles<ops::GroupedMatmulBiasGelu<D, 64, 64, 64, 3>, T, 64, 64, false, true>(w4);
  }
  SUBCASE("128x192, B in three 64-column panels") { check_tiles<ops::Matmul<D, 128, 192, 64>, T, 128, 192>(w8); }
  SUBCASE("64x128, one warpgroup, B in one 64-column panel pair") {
    check_tiles<ops::Matmul<D, 64, 128, 64>, T, 64, 128>(w4);
  }
  SUBCASE("128x128, K in two 64-column panels") { check_tiles<ops::Matmul<D, 128, 128, 128>, T, 128, 128>(w8); }
  SUBCASE("64x64, one panel") { check_tiles<ops::Matmul<D, 64, 64, 64>, T, 64, 64>(w4); }
  SUBCASE("bias and gelu fused") {
    check_tiles<ops::MatmulBiasGelu<D, 128, 128, 64>, T, 128, 128, false, true>(w8);
  }
  SUBCASE("A @ B^T, B read transposed") { check_tiles<MatmulNT<D, 128, 128, 64>, T, 128, 128, true>(w8); }
}

namespace {
/// Runs the f32 `Kernel` (BM x BN tiles; B as (N, K) for `bt`) with
/// `options` on ragged shapes against the f64 reference, at TF32's
/// accuracy (operands keep 10 of f32's 23 mantissa bits).
template <class Kernel, int BM, int BN, bool bt> void check_tf32_tiles(const CompileOptions &options) {
  auto k = compile<Kernel>(kCpu, options);
  if (test::target().kind == Target::Kind::Cuda && test::target().arch == "sm_90a") {
    const std::string &ptx = k.ir(Stage::Ptx);
    CHECK(ptx.find(".f32.tf32.tf32") != std::string::npos);
    CHECK(ptx.find("cp.async.bulk.tensor") != std::string::npos);
  }
  // K % 4 == 0: every row stride a multiple of 16 bytes (TMA); K = 37 and
  // N = 1 run the kernel compiled without TMA.
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {BM, BN, 32}, {BM + 3, 2 * BN - 8, 200}, {70, 56, 136},
                         {3 * BM + 5, BN + 4, 64}, {BM + 1, BN + 3, 37}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    auto a = test::random_vector<float>(std::size_t(M) * K, 81);
    auto b = test::random_vector<float>(std::size_t(K) * N, 82);
    std::vector<float> bkn = b; // (K, N) for the reference
    if (bt)
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < N; ++j)
          bkn[std::size_t(i) * N + j] = b[std::size_t(j) * K + i];
    std::vector<float> c(std::size_t(M) * N, -5.f);
    Mem da(a);
    Mem db(b);
    Mem dc(c);
    k.launch(Grid(ceil_div(M, BM), ceil_div(N, BN)), da(), db(), dc(), M, N, K, K, bt ? K : N, N);
    check(dc.fetch(), ref::matmul(a, bkn, M, N, K), 1e-2, 1e-2);
  }
}
} // namespace

TEST_CASE("TF32 products (wgmma on sm_90a) match the reference on ragged shapes") {
  CompileOptions w8, w4;
  w8.num_warps = 8;
  w8.num_stages = 3;
  w4.num_warps = 4;
  w4.num_stages = 4;
  SUBCASE("128x128, B transposed, read in place") { check_tf32_tiles<ops::MatmulTF32<128, 128, 32, true>, 128, 128, true>(w8); }
  SUBCASE("128x128, B as it is, transposed on the way") {
    check_tf32_tiles<ops::MatmulTF32<128, 128, 32>, 128, 128, false>(w8);
  }
  SUBCASE("64x256, K in two 32-column panels, grouped") {
    w4.num_stages = 2; // 80 KB of f32 operands per stage
    check_tf32_tiles<ops::MatmulTF32<64, 256, 64, true, 2>, 64, 256, true>(w4);
  }
  SUBCASE("warp-specialised and persistent") {
    CompileOptions ws = w8;
    ws.warp_specialize = ws.persistent = true;
    check_tf32_tiles<ops::MatmulTF32<128, 128, 32, true>, 128, 128, true>(ws);
  }
}

TEST_CASE_TEMPLATE("warp-specialised and persistent tensor-core tiles match the reference on ragged shapes", T,
                   half, bfloat16) {
  // On sm_90a a producer warp issues the TMA copies (and, persistent, the
  // programs loop over the tiles); elsewhere the options change nothing.
  using D = std::conditional_t<std::is_same_v<T, half>, f16, bf16>;
  for (bool persistent : {false, true}) {
    CAPTURE(persistent);
    CompileOptions w8, w4;
    w8.num_warps = 8;
    w8.num_stages = 3;
    w8.warp_specialize = true;
    w8.persistent = persistent;
    w4 = w8;
    w4.num_warps = 4;
    w4.num_stages = 4;
    check_tiles<ops::Matmul<D, 128, 256, 64>, T, 128, 256>(w8);
    check_tiles<ops::MatmulBiasGelu<D, 128, 128, 64>, T, 128, 128, false, true>(w8);
    check_tiles<ops::GroupedMatmul<D, 64, 64, 64, 3>, T, 64, 64>(w4);
    check_tiles<ops::Matmul<D, 64, 128, 64>, T, 64, 128>(w4);
    check_tiles<MatmulNT<D, 128, 128, 64>, T, 128, 128, true>(w8);
  }
}

TEST_CASE("a persistent matmul runs more tiles than fit on the GPU at once, in grouped order") {
  CompileOptions options;
  options.num_warps = 4;
  options.num_stages = 4;
  options.warp_specialize = true;
  options.persistent = true;
  auto k = compile<ops::GroupedMatmul<f16, 64, 64, 64, 4>>(kCpu, options);
  if (test::target().kind == Target::Kind::Cuda && test::target().arch == "sm_90a") {
    const std::string &ptx = k.ir(Stage::Ptx);
    CHECK(ptx.find("kiln_virtual_grid") != std::string::npos);
    CHECK(ptx.find("kiln_threads") != std::string::npos);
  }
  auto run = [&](int M, int N, int K, unsigned seed) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    auto a = test::random_vector<half>(std::size_t(M) * K, seed);
    auto b = test::random_vector<half>(std::size_t(K) * N, seed + 1);
    std::vector<half> c(std::size_t(M) * N, half(-5.0f));
    Mem da(a);
    Mem db(b);
    Mem dc(c);
    k.launch(Grid(ceil_div(M, 64), ceil_div(N, 64)), da(), db(), dc(), M, N, K, K, N, N);
    check(dc.fetch(), ref::matmul(a, b, M, N, K), 1e-2, 1e-2);
  };
  // 33 x 18 = 594 tiles of 64 x 64: more than an H200's 132 multiprocessors
  // hold at once (3 programs each with these rings); K = 200 leaves a
  // ragged last step.
  run(2100, 1100, 200, 91);
  // The same kernel on a grid of fewer tiles than programs that fit.
  run(300, 190, 72, 93);
}

TEST_CASE("tensor-core tiles on operands that are not 16-byte aligned match the reference") {
  // A base address one element past an aligned one: TMA cannot describe the
  // tensor, so the launch runs the kernel compiled without it.
  CompileOptions w8;
  w8.num_warps = 8;
  w8.num_stages = 3;
  auto k = compile<ops::Matmul<f16, 128, 128, 64>>(kCpu, w8);
  const int M = 130, N = 136, K = 192;
  auto a = test::random_vector<half>(std::size_t(M) * K + 1, 81);
  auto b = test::random_vector<half>(std::size_t(K) * N + 1, 82);
  std::vector<half> a0(a.begin() + 1, a.end()), b0(b.begin() + 1, b.end());
  std::vector<half> c(std::size_t(M) * N, half(-5.0f));
  Mem da(a);
  Mem db(b);
  Mem dc(c);
  Grid grid(ceil_div(M, 128), ceil_div(N, 128));
  k.launch(grid, da() + 1, db() + 1, dc(), M, N, K, K, N, N);
  check(dc.fetch(), ref::matmul(a0, b0, M, N, K), 1e-2, 1e-2);
  // And aligned again: the TMA kernel.
  std::vector<half> c2(std::size_t(M) * N, half(-5.0f));
  Mem da0(a0);
  Mem db0(b0);
  Mem dc2(c2);
  k.launch(grid, da0(), db0(), dc2(), M, N, K, K, N, N);
  check(dc2.fetch(), ref::matmul(a0, b0, M, N, K), 1e-2, 1e-2);
}

namespace {
/// Reductions along either axis of a 2-D tile, argmax, and a 128-element
/// tile (one element per thread at 4 warps) reduced to a scalar and
/// broadcast back: the shared-memory and shuffle paths of the GPU lowering.
struct Reductions {
  void operator()(Ptr<f32> x, Ptr<f32> colsum, Ptr<f32> colmax, Ptr<f32> rowmin, Ptr<i32> rowarg,
                  Ptr<f32> total, Ptr<f32> spread) const {
    auto r = arange<8>();
    auto c = arange<128>();
    auto offs = expand_dims<1>(r) * 128 + expand_dims<0>(c); // (8, 128)
    auto t = load(x + offs);
    store(colsum + c, sum<0>(t));
    store(colmax + c, max<0>(t));
    store(rowmin + r, min<1>(t));
    store(rowarg + r, argmax<1>(t));
    auto row0 = load(x + c); // (128)
    store(total, sum(row0));
    store(spread + offs, broadcast_to<8, 128>(expand_dims<0>(row0)) + cast<f32>(expand_dims<1>(r)));
  }
};
} // namespace

TEST_CASE("reductions along each axis, argmax and broadcasts match the reference") {
  for (int warps : {1, 4, 8}) {
    CAPTURE(warps);
    CompileOptions options;
    options.num_warps = warps;
    auto k = compile<Reductions>(kCpu, options);
    const int R = 8, C = 128;
    std::vector<float> x(R * C);
    for (int i = 0; i < R * C; ++i)
      x[i] = float((i * 37) % 101) / 7.f - 6.f;
    x[5 * C + 77] = 100.f; // a clear row maximum, and a tie below it
    x[6 * C + 3] = x[6 * C + 90] = 99.f;
    std::vector<float> colsum(C), colmax(C), rowmin(R), total(1), spread(R * C);
    std::vector<int32_t> rowarg(R, -1);
    Mem dx(x);
    Mem dcs(colsum);
    Mem dcm(colmax);
    Mem drm(rowmin);
    Mem dt(total);
    Mem ds(spread);
    Mem dra(rowarg);
    k.launch(Grid(1), dx(), dcs(), dcm(), drm(), dra(), dt(), ds());
    std::vector<double> wcs(C, 0), wcm(C, -1e30), wrm(R, 1e30), wt(1, 0), wsp(R * C);
    std::vector<int32_t> wra(R, 0);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) {
        double v = x[i * C + j];
        wcs[j] += v;
        wcm[j] = std::max(wcm[j], v);
        wrm[i] = std::min(wrm[i], v);
        if (v > x[i * C + wra[i]])
          wra[i] = j;
        wsp[i * C + j] = x[j] + i;
      }
    for (int j = 0; j < C; ++j)
      wt[0] += x[j];
    check(dcs.fetch(), wcs, 1e-4, 1e-5);
    check(dcm.fetch(), wcm, 0, 0);
    check(drm.fetch(), wrm, 0, 0);
    check(dt.fetch(), wt, 1e-3, 1e-5);
    check(ds.fetch(), wsp, 0, 0);
    CHECK(dra.fetch() == wra);
  }
}

TEST_CASE_TEMPLATE("split-K matmul with a bias+gelu epilogue matches the reference", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  constexpr int BM = 16, BN = 32, BK = 32;
  auto mm = compile<ops::MatmulSplitK<D, BM, BN, BK>>(kCpu);
  auto ep = compile<ops::SplitKEpilogue<D, 64, ops::Epilogue::BiasGelu>>(kCpu);
  const int M = 3, N = 100, K = 300, kSplit = 96, splits = (K + kSplit - 1) / kSplit;
  auto a = test::random_vector<T>(std::size_t(M) * K, 3);
  auto b = test::random_vector<T>(std::size_t(K) * N, 4);
  auto bias = test::random_vector<T>(N, 5);
  std::vector<float> partial(std::size_t(splits) * M * N, -1.f);
  std::vector<T> c(std::size_t(M) * N, T(0.f));
  Mem da(a);
  Mem db(b);
  Mem dbias(bias);
  Mem dc(c);
  Mem dp(partial);
  mm.launch(Grid(ceil_div(M, BM), ceil_div(N, BN), splits), da(), db(), dp(), M, N, K, K, N, kSplit);
  ep.launch(Grid(M, ceil_div(N, 64)), dp(), dbias(), dc(), dc(), M, N, splits);
  double tol = std::is_same_v<T, half> ? 1e-2 : 1e-5;
  check(dc.fetch(), ref::matmul(a, b, M, N, K, &bias), tol, tol);
}

TEST_CASE_TEMPLATE("one-launch split-K product adds its partial tiles and the residual in place", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  constexpr int BM = 16, BN = 32, BK = 32;
  auto k = compile<ops::SplitKLinear<D, BM, BN, BK, ops::Epilogue::BiasResidual>>(kCpu);
  // 10 rows (one ragged row tile), 100 columns (a ragged column tile) and
  // K = 700 in four ranges of 192 (the last one ragged).
  const int M = 10, N = 100, K = 700, kSplit = 192, splits = (K + kSplit - 1) / kSplit;
  auto a = test::random_vector<T>(std::size_t(M) * K, 13);
  auto b = test::random_vector<T>(std::size_t(K) * N, 14);
  auto bias = test::random_vector<T>(N, 15);
  const auto res = test::random_vector<T>(std::size_t(M) * N, 16);
  std::vector<T> c = res;
  std::vector<float> partial(std::size_t(splits) * M * N, -1.f);
  std::vector<int32_t> counter(std::size_t(ceil_div(M, BM) * ceil_div(N, BN)), 0);
  Mem da(a);
  Mem db(b);
  Mem dbias(bias);
  Mem dc(c);
  Mem dp(partial);
  Mem dn(counter);
  auto want = ref::matmul(a, b, M, N, K); // a @ b, then + bias per column
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] += double(float(bias[i % N]));
  double tol = std::is_same_v<T, half> ? 2e-2 : 1e-5;
  // Twice, each time adding the product to c: the last program of each
  // tile resets its counter for the next launch.
  for (int launch = 1; launch <= 2; ++launch) {
    k.launch(Grid(ceil_div(M, BM), ceil_div(N, BN), splits), da(), db(), dbias(), dc(), dc(), dp(), dn(), M,
             N, K, kSplit);
    std::vector<double> expect(want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      expect[i] = double(float(res[i])) + launch * want[i];
    check(dc.fetch(), expect, tol, tol);
    CHECK(dn.fetch() == std::vector<int32_t>(counter.size(), 0));
  }
}

TEST_CASE_TEMPLATE("few-row product on the transposed weight adds its partial tiles and the residual in place", T,
                   float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  constexpr int BR = 16, BN = 32;
  // 10 of 16 rows, 100 columns (a ragged column tile), K = 700: in 11
  // ranges of 64 (more than one step of the last program's sum, the last
  // range ragged), and in one range of 768.
  const int M = 10, N = 100, K = 700;
  auto x = test::random_vector<T>(std::size_t(M) * K, 23);
  auto wt = test::random_vector<T>(std::size_t(N) * K, 24); // [N, K]
  auto bias = test::random_vector<T>(N, 25);
  const auto res = test::random_vector<T>(std::size_t(M) * N, 26);
  std::vector<T> w(std::size_t(K) * N); // [K, N] for the reference
  for (int n = 0; n < N; ++n)
    for (int kk = 0; kk < K; ++kk)
      w[std::size_t(kk) * N + n] = wt[std::size_t(n) * K + kk];
  auto want = ref::matmul(x, w, M, N, K); // then + bias per column
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] += double(float(bias[i % N]));
  double tol = std::is_same_v<T, half> ? 2e-2 : 1e-4;
  auto run = [&]<class Few>(int splits) {
    CAPTURE(splits);
    REQUIRE(Few::splits(K) == splits);
    auto k = compile<Few>(kCpu);
    std::vector<T> c = res;
    std::vector<float> partial(std::size_t(splits) * N * BR, -1.f);
    std::vector<int32_t> counter(std::size_t(ceil_div(N, BN)), 0);
    Mem dx(x);
    Mem dw(wt);
    Mem dbias(bias);
    Mem dc(c);
    Mem dp(partial);
    Mem dn(counter);
    // Twice, each time adding the product to c: the last program of each
    // column tile resets its counter for the next launch.
    for (int launch = 1; launch <= 2; ++launch) {
      // The second launch also prefetches (the weight): nothing computed changes.
      k.launch(Grid(ceil_div(N, BN), splits), dx(), dw(), dbias(), dc(), dc(), dp(), dn(), M, N, K, dw(),
               launch == 2 ? int(wt.size()) : 0);
      std::vector<double> expect(want.size());
      for (std::size_t i = 0; i < want.size(); ++i)
        expect[i] = double(float(res[i])) + launch * want[i];
      check(dc.fetch(), expect, tol, tol);
      CHECK(dn.fetch() == std::vector<int32_t>(counter.size(), 0));
    }
  };
  run.template operator()<ops::FewRowsLinear<D, BR, BN, 32, 2, ops::Epilogue::BiasResidual>>(11);
  run.template operator()<ops::FewRowsLinear<D, BR, BN, 128, 6, ops::Epilogue::BiasResidual>>(1);
}

TEST_CASE_TEMPLATE("few-row products after a fused layernorm: MLP up with gelu, the LM head, QKV into the caches", T, float,
                   half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  constexpr int BR = 16, BN = 16;
  // 5 of 16 rows, K = 200: in 4 ranges of 64 (the panel covers part of
  // each row, whose statistics still span all of it; the last range
  // ragged), and in one range of 256. N = 3 * 24 for QKV (ragged tiles).
  const int M = 5, K = 200, W = 24, N = 3 * W, Tmax = 6;
  auto x = test::random_vector<T>(std::size_t(M) * K, 51);
  auto g = test::random_vector<T>(K, 52), beta = test::random_vector<T>(K, 53);
  auto wt = test::random_vector<T>(std::size_t(N) * K, 54); // [N, K]
  auto bias = test::random_vector<T>(N, 55);
  std::vector<int32_t> pos{4, 0, 5, 2, 3};
  // The reference: layernorm in double, rounded to T as a separate
  // layernorm kernel stores it, then the product.
  auto normed = ref::layernorm(x, g, beta, M, K, 1e-5);
  std::vector<T> nt(normed.size());
  for (std::size_t i = 0; i < normed.size(); ++i)
    nt[i] = T(float(normed[i]));
  std::vector<T> w(std::size_t(K) * N);
  for (int n = 0; n < N; ++n)
    for (int kk = 0; kk < K; ++kk)
      w[std::size_t(kk) * N + n] = wt[std::size_t(n) * K + kk];
  auto product = ref::matmul(nt, w, M, N, K);
  const auto plain = product; // the LM head's: no bias
  for (std::size_t i = 0; i < product.size(); ++i)
    product[i] += double(float(bias[i % N]));
  std::vector<double> gelu(product.size());
  for (std::size_t i = 0; i < product.size(); ++i)
    gelu[i] = ref::gelu_tanh(product[i]);
  double tol = std::is_same_v<T, half> ? 2e-2 : 1e-4;
  auto run = [&]<int KC, int C>(int splits) {
    CAPTURE(splits);
    using Up = ops::FewRowsNormLinear<D, BR, BN, KC, C, ops::Epilogue::BiasGelu>;
    using Head = ops::FewRowsNormLinear<D, BR, BN, KC, C, ops::Epilogue::None>;
    using Qkv = ops::FewRowsQkv<D, BR, BN, KC, C>;
    REQUIRE(Up::splits(K) == splits);
    auto up = compile<Up>(kCpu);
    auto head = compile<Head>(kCpu);
    auto qkvk = compile<Qkv>(kCpu);
    std::vector<float> partial(std::size_t(splits) * N * BR, -1.f);
    std::vector<int32_t> counter(std::size_t(ceil_div(N, BN)), 0);
    std::vector<T> out(std::size_t(M) * N, T(0.f)), kc(std::size_t(M) * Tmax * W, T(-1.f)), vc = kc;
    Mem dx(x);
    Mem dg(g);
    Mem dbeta(beta);
    Mem dwt(wt);
    Mem dbias(bias);
    Mem dpos(pos);
    Mem dp(partial);
    Mem dn(counter);
    Mem dout(out);
    Mem dkc(kc);
    Mem dvc(vc);
    up.launch(Grid(ceil_div(N, BN), splits), dx(), dg(), dbeta(), dwt(), dbias(), dout(), dp(), dn(), M, N, K,
              1e-5f, dwt(), int(wt.size()));
    check(dout.fetch(), gelu, tol, tol);
    CHECK(dn.fetch() == std::vector<int32_t>(counter.size(), 0));
    head.launch(Grid(ceil_div(N, BN), splits), dx(), dg(), dbeta(), dwt(), dbias(), dout(), dp(), dn(), M, N, K,
                1e-5f, dwt(), 0);
    check(dout.fetch(), plain, tol, tol);
    CHECK(dn.fetch() == std::vector<int32_t>(counter.size(), 0));
    qkvk.launch(Grid(ceil_div(N, BN), splits), dx(), dg(), dbeta(), dwt(), dbias(), dout(), dp(), dn(), dpos(),
                dkc(), dvc(), M, N, K, Tmax, 1e-5f, dwt(), int(wt.size()));
    check(dout.fetch(), product, tol, tol);
    CHECK(dn.fetch() == std::vector<int32_t>(counter.size(), 0));
    std::vector<double> wk(kc.size(), -1.0), wv(vc.size(), -1.0);
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < W; ++c) {
        std::size_t at = (std::size_t(m) * Tmax + std::size_t(pos[std::size_t(m)])) * W + c;
        wk[at] = product[std::size_t(m) * N + W + c];
        wv[at] = product[std::size_t(m) * N + 2 * W + c];
      }
    check(dkc.fetch(), wk, tol, tol);
    check(dvc.fetch(), wv, tol, tol);
    // Without the layernorm: the rows normalised (and rounded) beforehand
    // give the same q, k, v and cache rows.
    auto plainQkv = compile<ops::FewRowsQkv<D, BR, BN, KC, C, false>>(kCpu);
    std::vector<T> out2(out.size(), T(0.f)), kc2(kc.size(), T(-1.f)), vc2 = kc2;
    Mem dnt(nt);
    Mem dout2(out2);
    Mem dkc2(kc2);
    Mem dvc2(vc2);
    plainQkv.launch(Grid(ceil_div(N, BN), splits), dnt(), dg(), dbeta(), dwt(), dbias(), dout2(), dp(), dn(),
                    dpos(), dkc2(), dvc2(), M, N, K, Tmax, 1e-5f, dwt(), 0);
    check(dout2.fetch(), product, tol, tol);
    CHECK(dn.fetch() == std::vector<int32_t>(counter.size(), 0));
    check(dkc2.fetch(), wk, tol, tol);
    check(dvc2.fetch(), wv, tol, tol);
  };
  run.template operator()<32, 2>(4);
  run.template operator()<128, 2>(1);
}

TEST_CASE("row argmax finds the first maximum and advances the position") {
  auto k = compile<ops::ArgmaxRows<f32, 256>>(kCpu);
  const int R = 3, V = 1000;
  std::vector<float> logits(R * V);
  for (int i = 0; i < R * V; ++i)
    logits[i] = float((i * 7919) % 1009) / 100.f;
  logits[0 * V + 999] = 50.f;                           // last column
  logits[1 * V + 10] = logits[1 * V + 700] = 60.f;      // a tie: the first wins
  logits[2 * V + 0] = 70.f;                             // first column
  std::vector<int32_t> next(R, -1), pos{5, 6, 7};
  Mem dl(logits);
  Mem dn(next);
  Mem dpos(pos);
  k.launch(Grid(R), dl(), dn(), dpos(), V, V, 1);
  CHECK(dn.fetch() == std::vector<int32_t>{999, 10, 0});
  CHECK(dpos.fetch() == std::vector<int32_t>{6, 7, 8});
}

TEST_CASE("row argmax over rows of an odd stride") {
  // Rows of 1003 halves: most start off a 16-byte boundary (not rows 0
  // and 8), and the sweep starts before column 0 of those.
  auto k = compile<ops::ArgmaxRows<f16, 256>>(kCpu);
  const int R = 9, V = 1001, ld = 1003;
  std::vector<half> logits(std::size_t(R) * ld, half(99.0f)); // the padding is never read
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < V; ++c)
      logits[std::size_t(r * ld + c)] = half(float((r * 31 + c * 7919) % 1009) / 100.f - 20.f);
  std::vector<int32_t> want(R);
  for (int r = 0; r < R; ++r) {
    int c = r % 3 == 0 ? 0 : r % 3 == 1 ? V - 1 : 5 + r;
    logits[std::size_t(r * ld + c)] = half(40.0f);
    if (r % 3 == 2)
      logits[std::size_t(r * ld + c + 100)] = half(40.0f); // a tie: the first wins
    want[std::size_t(r)] = c;
  }
  std::vector<int32_t> next(R, -1), pos(R, 0);
  Mem dl(logits);
  Mem dn(next);
  Mem dpos(pos);
  k.launch(Grid(R), dl(), dn(), dpos(), V, ld, 1);
  CHECK(dn.fetch() == want);
}

namespace {
/// Read-modify-writes of values that every GPU thread holds: tiles of 8 and
/// 16 elements (fewer than the program's 128 threads) and a scalar. Each
/// element is to change once per launch, whichever warp runs first. The
/// increment comes from a reduction over all the warps, so that on the GPU
/// the loads follow its barriers, as in ArgmaxRows.
struct AddToSmall {
  void operator()(Ptr<i32> counts, Ptr<f32> sums, Ptr<i32> total, I32 n) const {
    auto p = program_id(0);
    auto one = max(arange<256>()) - 254;
    auto at = counts + p * 8 + arange<8>();
    store(at, load(at) + one);
    auto c = arange<16>();
    auto s = sums + p * 16 + c;
    store(s, load(s, c < n, 0.0f) + cast<f32>(c * one), c < n);
    store(total + p, load(total + p) + n * one);
  }
};
} // namespace

TEST_CASE("read-modify-writes of small tiles and scalars happen once per program") {
  auto k = compile<AddToSmall>(kCpu);
  const int P = 6, n = 11, launches = 5;
  std::vector<int32_t> counts(P * 8, 100), total(P, 7);
  std::vector<float> sums(P * 16, -1.f);
  Mem dc(counts);
  Mem dt(total);
  Mem ds(sums);
  for (int i = 0; i < launches; ++i)
    k.launch(Grid(P), dc(), ds(), dt(), n);
  std::vector<double> wantSums(sums.size());
  for (int i = 0; i < P * 16; ++i)
    wantSums[std::size_t(i)] = i % 16 < n ? -1.0 + launches * (i % 16) : -1.0;
  CHECK(dc.fetch() == std::vector<int32_t>(P * 8, 100 + launches));
  check(ds.fetch(), wantSums, 0, 0);
  CHECK(dt.fetch() == std::vector<int32_t>(P, 7 + launches * n));
}

namespace {
/// Empirical frequencies of `tokens` against probabilities `p` (0 outside the
/// allowed set): every draw allowed, every frequency within 4.5 sigma.
void checkDraws(const std::vector<int32_t> &tokens, const std::vector<double> &p) {
  std::vector<double> freq(p.size(), 0.0);
  for (int32_t t : tokens) {
    REQUIRE(t >= 0);
    REQUIRE(t < int32_t(p.size()));
    CHECK_MESSAGE(p[std::size_t(t)] > 0, "token " << t << " is outside the allowed set");
    freq[std::size_t(t)] += 1.0 / double(tokens.size());
  }
  for (std::size_t i = 0; i < p.size(); ++i) {
    double sigma = std::sqrt(std::max(p[i] * (1 - p[i]), 1e-6) / double(tokens.size()));
    CHECK_MESSAGE(std::abs(freq[i] - p[i]) <= 4.5 * sigma + 1e-3,
                  "token " << i << ": drawn " << freq[i] << ", probability " << p[i]);
  }
}
/// softmax(x / temp) over the `keep` largest entries whose mass reaches top_p.
std::vector<double> target(const std::vector<float> &x, double temp, int topK, double topP) {
  std::vector<int> order(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    order[i] = int(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  std::size_t k = topK > 0 ? std::size_t(topK) : x.size();
  double z = 0;
  for (std::size_t i = 0; i < k; ++i)
    z += std::exp((x[order[i]] - x[order[0]]) / temp);
  double mass = 0;
  std::size_t keep = 0;
  while (keep < k && (keep == 0 || mass < topP * z))
    mass += std::exp((x[order[keep++]] - x[order[0]]) / temp);
  std::vector<double> p(x.size(), 0.0);
  for (std::size_t i = 0; i < keep; ++i)
    p[std::size_t(order[i])] = std::exp((x[order[i]] - x[order[0]]) / temp) / mass;
  return p;
}
} // namespace

TEST_CASE("sampling draws from softmax(logits / T) restricted by top-k and top-p") {
  auto k = compile<ops::SampleRows<f32, 64>>(kCpu);
  const int V = 40, R = 4000;
  std::vector<float> logits(V);
  for (int i = 0; i < V; ++i)
    logits[i] = float((i * 17) % 40) * 0.13f - 2.0f; // distinct values
  struct Case {
    float temp;
    int topK;
    float topP;
  };
  for (Case c : {Case{1.0f, 0, 1.0f}, Case{1.0f, 5, 1.0f}, Case{0.7f, 0, 0.6f}, Case{2.0f, 12, 0.8f}}) {
    CAPTURE(c.temp);
    CAPTURE(c.topK);
    CAPTURE(c.topP);
    std::vector<int32_t> next(R, -1), pos(R, 3);
    Mem dl(logits);
    Mem dn(next);
    Mem dpos(pos);
    // Row stride 0: every row samples the same logits with its own noise.
    k.launch(Grid(R), dl(), dn(), dpos(), V, 0, 1, c.temp, c.topK, c.topP, 1234);
    checkDraws(dn.fetch(), target(logits, c.temp, c.topK, c.topP));
    CHECK(dpos.fetch() == std::vector<int32_t>(R, 4));
  }
  // The same seed and positions give the same draws; another seed does not.
  std::vector<int32_t> a(64), b(64), c(64), pos(64, 0);
  Mem dl(logits);
  Mem da(a);
  Mem db(b);
  Mem dc(c);
  Mem dp(pos);
  k.launch(Grid(64), dl(), da(), dp(), V, 0, 0, 1.0f, 0, 1.0f, 7);
  k.launch(Grid(64), dl(), db(), dp(), V, 0, 0, 1.0f, 0, 1.0f, 7);
  k.launch(Grid(64), dl(), dc(), dp(), V, 0, 0, 1.0f, 0, 1.0f, 8);
  CHECK(da.fetch() == db.fetch());
  CHECK(da.fetch() != dc.fetch());
}

namespace {
/// b (K, N) as the (N, K) layout the decode kernels read.
template <class T> std::vector<T> transposed(const std::vector<T> &b, int K, int N) {
  std::vector<T> t(b.size());
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n)
      t[std::size_t(n) * K + k] = b[std::size_t(k) * N + n];
  return t;
}
} // namespace

TEST_CASE_TEMPLATE("decode linear: layernorm, product, bias and gelu in one kernel", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  // K = 200 is not a whole number of 64-chunks, N = 70 not of 8-column
  // blocks, and M = 3 of BM = 4 rows: row 3 must stay untouched.
  constexpr int K = 200;
  using Kernel = ops::DecodeLinear<D, 8, 64>;
  auto k = compile(kCpu, {}, Kernel{.rows = 4, .k = K, .ln = true, .epilogue = ops::Epilogue::BiasGelu});
  const int M = 3, N = 70;
  auto x = test::random_vector<T>(std::size_t(4) * K, 21, -2, 3);
  auto g = test::random_vector<T>(K, 22), beta = test::random_vector<T>(K, 23);
  auto b = test::random_vector<T>(std::size_t(K) * N, 24);
  auto bias = test::random_vector<T>(N, 25);
  auto wt = transposed(b, K, N);
  std::vector<T> out(std::size_t(4) * N, T(7.f));
  Mem dx(x);
  Mem dg(g);
  Mem dbeta(beta);
  Mem dwt(wt);
  Mem dbias(bias);
  Mem dout(out);
  // The grid also prefetches a range (the weight itself): a hint that
  // changes nothing computed.
  k.launch(Grid(ceil_div(N, 8)), dx(), dg(), dbeta(), dwt(), dbias(), dout(), dout(), M, N, 1e-5f, dwt(),
           int(wt.size()));
  auto normed = ref::layernorm(x, g, beta, M, K, 1e-5);
  std::vector<float> nf(normed.begin(), normed.end());
  std::vector<float> bf(b.begin(), b.end()), biasf(bias.begin(), bias.end());
  auto want = ref::matmul(nf, bf, M, N, K, &biasf);
  want.resize(std::size_t(4) * N, 7.0);
  double tol = std::is_same_v<T, half> ? 2e-2 : 1e-4;
  check(dout.fetch(), want, tol, tol);
}

TEST_CASE_TEMPLATE("decode linear: product, bias and residual in place", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  constexpr int K = 256;
  using Kernel = ops::DecodeLinear<D, 4, 128>;
  auto k = compile(kCpu, {}, Kernel{.rows = 2, .k = K, .epilogue = ops::Epilogue::BiasResidual});
  const int M = 2, N = 36;
  auto a = test::random_vector<T>(std::size_t(M) * K, 31);
  auto b = test::random_vector<T>(std::size_t(K) * N, 32);
  auto bias = test::random_vector<T>(N, 33), res = test::random_vector<T>(std::size_t(M) * N, 34);
  auto wt = transposed(b, K, N);
  std::vector<T> io = res;
  Mem da(a);
  Mem dwt(wt);
  Mem dbias(bias);
  Mem dio(io);
  k.launch(Grid(ceil_div(N, 4)), da(), da(), da(), dwt(), dbias(), dio(), dio(), M, N, 0.0f, dwt(), 0);
  auto want = ref::matmul(a, b, M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n)
      want[std::size_t(m) * N + n] +=
          double(float(bias[std::size_t(n)])) + double(float(res[std::size_t(m) * N + n]));
  double tol = std::is_same_v<T, half> ? 2e-2 : 1e-4;
  check(dio.fetch(), want, tol, tol);
}

TEST_CASE("decode QKV: layernorm, product and bias, with k and v written to the caches") {
  constexpr int K = 64;
  auto k = compile(kCpu, {}, ops::DecodeQkv<f32, 8, 64>{.rows = 2, .k = K});
  const int M = 2, C = 24, N = 3 * C, Tmax = 5;
  auto x = test::random_vector<float>(std::size_t(M) * K, 41);
  auto g = test::random_vector<float>(K, 42), beta = test::random_vector<float>(K, 43);
  auto b = test::random_vector<float>(std::size_t(K) * N, 44);
  auto bias = test::random_vector<float>(N, 45);
  auto wt = transposed(b, K, N);
  std::vector<float> qkv(std::size_t(M) * N, 0.f), kc(std::size_t(M) * Tmax * C, -1.f),
      vc(kc.size(), -1.f);
  std::vector<int32_t> pos{3, 1};
  Mem dx(x);
  Mem dg(g);
  Mem dbeta(beta);
  Mem dwt(wt);
  Mem dbias(bias);
  Mem dqkv(qkv);
  Mem dkc(kc);
  Mem dvc(vc);
  Mem dpos(pos);
  k.launch(Grid(ceil_div(N, 8)), dx(), dg(), dbeta(), dwt(), dbias(), dqkv(), dpos(), dkc(), dvc(),
           M, N, Tmax, 1e-5f, dx(), int(x.size()));
  auto normed = ref::layernorm(x, g, beta, M, K, 1e-5);
  std::vector<float> nf(normed.begin(), normed.end());
  auto want = ref::matmul(nf, b, M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n)
      want[std::size_t(m) * N + n] += bias[std::size_t(n)];
  check(dqkv.fetch(), want, 1e-4, 1e-4);
  std::vector<double> wk(kc.size(), -1.0), wv(vc.size(), -1.0);
  for (int m = 0; m < M; ++m)
    for (int c = 0; c < C; ++c) {
      std::size_t at = (std::size_t(m) * Tmax + std::size_t(pos[std::size_t(m)])) * C + c;
      wk[at] = want[std::size_t(m) * N + C + c];
      wv[at] = want[std::size_t(m) * N + 2 * C + c];
    }
  check(dkc.fetch(), wk, 1e-4, 1e-4);
  check(dvc.fetch(), wv, 1e-4, 1e-4);
}

namespace {
/// Program (g, i) stores g * 1000 + i; the last program of group g to count
/// itself sums the group's stores (which its atomic_add makes visible) and
/// resets the counter.
struct LastOfGroup {
  void operator()(Ptr<i32> buf, Ptr<i32> counter, Ptr<i32> total) const {
    auto g = program_id(0), i = program_id(1), P = num_programs(1);
    store(buf + g * P + i, g * 1000 + i);
    auto last = atomic_add(counter + g, 1) == P - 1;
    auto r = arange<64>();
    auto vals = load(buf + g * P + r, (r < P) & last, 0);
    store(total + g, sum(vals), last);
    store(counter + g, I32(0), last);
  }
};
} // namespace

TEST_CASE("atomic_add: the last program of a group sees the stores of the others") {
  auto k = compile<LastOfGroup>(kCpu);
  const int G = 5, P = 50;
  for (int rep = 0; rep < 3; ++rep) { // counters are reset for the next launch
    std::vector<int32_t> buf(G * P, -1), counter(G, 0), total(G, -1);
    Mem dbuf(buf);
    Mem dcount(counter);
    Mem dtotal(total);
    k.launch(Grid(G, P), dbuf(), dcount(), dtotal());
    std::vector<int32_t> want;
    for (int g = 0; g < G; ++g)
      want.push_back(P * g * 1000 + P * (P - 1) / 2);
    CHECK(dtotal.fetch() == want);
    CHECK(dcount.fetch() == std::vector<int32_t>(G, 0));
  }
}

namespace {
/// Program (g, i) adds (i + 1) * (r + 1) to acc[g * 64 + r] for r < n; the
/// last program of group g to count reads the sums back, writes them to
/// `total` and zeroes acc and its counter.
struct AccumulateGroups {
  void operator()(Ptr<f32> acc, Ptr<i32> counter, Ptr<f32> total, I32 n) const {
    auto g = program_id(0), i = program_id(1), P = num_programs(1);
    auto r = arange<64>();
    auto row = acc + g * 64 + r;
    atomic_accumulate(row, cast<f32>((i + 1) * (r + 1)), r < n);
    ops::detail::when(atomic_add(counter + g, 1) == P - 1, [&] {
      store(total + g * 64 + r, load(row));
      store(row, zeros<f32, 64>());
      store(counter + g, I32(0));
    });
  }
};
} // namespace

TEST_CASE("atomic_accumulate: every program's additions land, and the last to count sees them") {
  auto k = compile<AccumulateGroups>(kCpu);
  const int G = 3, P = 40, n = 50;
  std::vector<float> acc(G * 64, 0.f);
  std::vector<int32_t> counter(G, 0);
  Mem dacc(acc);
  Mem dcount(counter);
  for (int rep = 0; rep < 3; ++rep) { // acc and the counters are zero again after each launch
    std::vector<float> total(G * 64, -1.f);
    Mem dtotal(total);
    k.launch(Grid(G, P), dacc(), dcount(), dtotal(), n);
    std::vector<float> want(G * 64, 0.f);
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < n; ++r) // sum over i of (i + 1)(r + 1), exact in f32
        want[std::size_t(g * 64 + r)] = float(P * (P + 1) / 2 * (r + 1));
    CHECK(dtotal.fetch() == want);
    CHECK(dacc.fetch() == std::vector<float>(G * 64, 0.f));
    CHECK(dcount.fetch() == std::vector<int32_t>(G, 0));
  }
}

TEST_CASE_TEMPLATE("decode MLP: layernorm, up, gelu, down, bias and residual in one launch", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  // H = 200 hidden units are not whole 16-unit slices, and M = 3 of BM = 4
  // rows: row 3 must stay untouched. In place (out = x), twice: the
  // accumulator and the counter are zero again after a launch.
  constexpr int C = 128, BH = 16;
  auto k = compile(kCpu, {}, ops::DecodeMlp<D, BH, 64>{.rows = 4, .c = C});
  const int M = 3, H = 200;
  auto x0 = test::random_vector<T>(std::size_t(4) * C, 51, -2, 3);
  auto g = test::random_vector<T>(C, 52), beta = test::random_vector<T>(C, 53);
  auto wu = test::random_vector<T>(std::size_t(C) * H, 54); // [C, H]
  auto bu = test::random_vector<T>(H, 55);
  auto wd = test::random_vector<T>(std::size_t(H) * C, 56); // [H, C]
  auto bd = test::random_vector<T>(C, 57);
  auto wut = transposed(wu, C, H);
  std::vector<float> acc(std::size_t(4) * C, 0.f);
  std::vector<int32_t> counter{0};
  std::vector<T> io = x0;
  Mem dio(io);
  Mem dg(g);
  Mem dbeta(beta);
  Mem dwut(wut);
  Mem dbu(bu);
  Mem dwd(wd);
  Mem dbd(bd);
  Mem dacc(acc);
  Mem dcount(counter);
  double tol = std::is_same_v<T, half> ? 3e-2 : 1e-4;
  std::vector<T> x = x0;
  for (int rep = 0; rep < 2; ++rep) {
    k.launch(Grid(ceil_div(H, BH)), dio(), dg(), dbeta(), dwut(), dbu(), dwd(), dbd(), dio(), dacc(), dcount(), M,
             H, 1e-5f, dwd(), int(wd.size()));
    auto normed = ref::layernorm(x, g, beta, M, C, 1e-5);
    std::vector<float> nf(normed.begin(), normed.end()), wuf(wu.begin(), wu.end()), buf(bu.begin(), bu.end());
    auto hidden = ref::matmul(nf, wuf, M, H, C, &buf);
    std::vector<T> ht; // rounded to T, as the kernel (and the two-launch MLP) does
    for (double h : hidden)
      ht.push_back(T(float(h)));
    auto want = ref::matmul(ht, wd, M, C, H);
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < C; ++c)
        want[std::size_t(m) * C + c] += double(float(bd[std::size_t(c)])) + double(float(x[std::size_t(m) * C + c]));
    for (int c = 0; c < C; ++c)
      want.push_back(double(float(x[std::size_t(3 * C + c)])));
    check(dio.fetch(), want, tol, tol);
    for (std::size_t i = 0; i < want.size(); ++i)
      x[i] = dio.host[i]; // the next launch's input
    CHECK(dacc.fetch() == std::vector<float>(std::size_t(4) * C, 0.f));
    CHECK(dcount.fetch() == std::vector<int32_t>{0});
  }
}

TEST_CASE("decode attention over a split cache matches softmax attention") {
  // Sequences of 1, 2, 9, 38 and 300 keys (blocks of 8) over 1, 3 and 4
  // programs per head: spans of one block and of many, programs past the
  // last span, a cache longer than SPLITS * BN; the same grid for them all.
  constexpr int D = 16, BN = 8, SPLITS = 4;
  auto k = compile<ops::AttentionDecode<f32, BN, D, SPLITS>>(kCpu);
  const int B = 5, H = 2, C = H * D, Tmax = 300;
  auto qkv = test::random_vector<float>(std::size_t(B) * 3 * C, 51);
  auto kc = test::random_vector<float>(std::size_t(B) * Tmax * C, 52, -2, 2);
  auto vc = test::random_vector<float>(std::size_t(B) * Tmax * C, 53);
  std::vector<int32_t> counter(B * H, 0), pos{37, 299, 0, 8, 1};
  Mem dqkv(qkv);
  Mem dkc(kc);
  Mem dvc(vc);
  Mem dcount(counter);
  Mem dpos(pos);
  const float scale = 0.25f;
  std::vector<double> want(std::size_t(B) * C);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      std::vector<double> sc;
      double top = -1e300;
      for (int j = 0; j <= pos[std::size_t(b)]; ++j) {
        double dotp = 0;
        for (int d = 0; d < D; ++d)
          dotp += double(qkv[std::size_t(b) * 3 * C + h * D + d]) *
                  double(kc[(std::size_t(b) * Tmax + j) * C + h * D + d]);
        sc.push_back(dotp * scale);
        top = std::max(top, sc.back());
      }
      double z = 0;
      for (double x : sc)
        z += std::exp(x - top);
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (std::size_t j = 0; j < sc.size(); ++j)
          o += std::exp(sc[j] - top) / z * double(vc[(std::size_t(b) * Tmax + j) * C + h * D + d]);
        want[std::size_t(b) * C + h * D + d] = o;
      }
    }
  for (int S : {1, 3, SPLITS})
    for (int rep = 0; rep < 2; ++rep) { // the counters are back at 0 for the next launch
      CAPTURE(S);
      CAPTURE(rep);
      std::vector<float> part(std::size_t(B) * H * S * (D + 2), std::nanf("")), out(std::size_t(B) * C, -7.f);
      Mem dpart(part);
      Mem dout(out);
      k.launch(Grid(B, H, S), dqkv(), dkc(), dvc(), dpart(), dcount(), dout(), dpos(), C, Tmax, scale);
      check(dout.fetch(), want, 1e-5, 1e-4);
      CHECK(dcount.fetch() == std::vector<int32_t>(B * H, 0));
    }
  // Split over the programs of a cluster, merged in its shared memory: the
  // grid is (programs, H, B); programs past the last span (a 1-key
  // sequence) still take part in the exchange; parts and count untouched.
  auto cluster = [&](const auto &kernel, int S) {
    CAPTURE(S);
    std::vector<float> part(1, std::nanf("")), out(std::size_t(B) * C, -7.f);
    Mem dpart(part);
    Mem dout(out);
    kernel.launch(Grid(S, H, B), dqkv(), dkc(), dvc(), dpart(), dcount(), dout(), dpos(), C, Tmax, scale);
    check(dout.fetch(), want, 1e-5, 1e-4);
    CHECK(dcount.fetch() == std::vector<int32_t>(B * H, 0));
    CHECK(std::isnan(dpart.fetch()[0]));
  };
  cluster(compile<ops::AttentionDecodeCluster<f32, BN, D, SPLITS>>(kCpu), SPLITS);
  cluster(compile<ops::AttentionDecodeCluster<f32, BN, D, 2>>(kCpu), 2);
  // Keys in registers, loaded before the wait: one program a head (keys
  // past the first block online), or a cluster's programs a block each
  // (sequences of 1-38 keys in one pass over 4 blocks of 8, 300 keys also
  // online), the same grid shape.
  cluster(compile<ops::AttentionDecodeResident<f32, BN, D, 1>>(kCpu), 1);
  cluster(compile<ops::AttentionDecodeResident<f32, 32, D, 1>>(kCpu), 1);
  cluster(compile<ops::AttentionDecodeResident<f32, BN, D, 2>>(kCpu), 2);
  cluster(compile<ops::AttentionDecodeResident<f32, 16, D, SPLITS>>(kCpu), SPLITS);
  // A head a program (SPLITS = 1): no parts, no count.
  auto one = compile<ops::AttentionDecode<f32, BN, D, 1>>(kCpu);
  std::vector<float> part(1, std::nanf("")), out(std::size_t(B) * C, -7.f);
  Mem dpart(part);
  Mem dout(out);
  one.launch(Grid(B, H, 1), dqkv(), dkc(), dvc(), dpart(), dcount(), dout(), dpos(), C, Tmax, scale);
  check(dout.fetch(), want, 1e-5, 1e-4);
  CHECK(dcount.fetch() == std::vector<int32_t>(B * H, 0));
  CHECK(std::isnan(dpart.fetch()[0]));
}

namespace {
/// kiln.trans as a product's B operand (read in place on tensor cores) and
/// on its own (through shared memory), and a row reduction of a product
/// broadcast back along its rows (the row-slice layout of the GPU lowering).
template <class T> struct TransProducts {
  void operator()(Ptr<T> a, Ptr<T> b, Ptr<f32> c, Ptr<T> at, Ptr<f32> centred) const {
    auto r = arange<32>();
    auto offs = expand_dims<1>(r) * 32 + expand_dims<0>(r); // (32, 32)
    auto x = load(a + offs);
    auto y = load(b + offs);
    auto p = dot(x, trans(y));
    store(c + offs, p);
    store(at + offs, trans(x));
    store(centred + offs, p - expand_dims<1>(max<1>(p)) + expand_dims<1>(sum<1>(p)));
  }
};
} // namespace

TEST_CASE_TEMPLATE("trans: a @ b^T, a^T, and rows of a product reduced and broadcast back", T, float, half) {
  using D = std::conditional_t<std::is_same_v<T, float>, f32, f16>;
  auto k = compile<TransProducts<D>>(kCpu);
  const int n = 32;
  auto a = test::random_vector<T>(n * n, 61), b = test::random_vector<T>(n * n, 62);
  std::vector<float> c(n * n, -7.f), centred(n * n, -7.f);
  std::vector<T> at(n * n, T(-7.f));
  Mem da(a);
  Mem db(b);
  Mem dc(c);
  Mem dat(at);
  Mem dcentred(centred);
  k.launch(Grid(1), da(), db(), dc(), dat(), dcentred());
  std::vector<double> prod(n * n), wantT(n * n), wantC(n * n);
  for (int i = 0; i < n; ++i) {
    double top = -1e300, total = 0;
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int kk = 0; kk < n; ++kk)
        s += double(float(a[i * n + kk])) * double(float(b[j * n + kk]));
      prod[i * n + j] = s;
      top = std::max(top, s);
      total += s;
      wantT[j * n + i] = double(float(a[i * n + j]));
    }
    for (int j = 0; j < n; ++j)
      wantC[i * n + j] = prod[i * n + j] - top + total;
  }
  double tol = std::is_same_v<T, half> ? 2e-2 : 1e-5;
  check(dc.fetch(), prod, tol, tol);
  check(dat.fetch(), wantT, 0, 0);
  check(dcentred.fetch(), wantC, 20 * tol, tol);
}

template <class T, bool CAUSAL, int HD = 64> void check_prefill_attention() {
  using D = std::conditional_t<std::is_same_v<T, float>, f32,
                               std::conditional_t<std::is_same_v<T, half>, f16, bf16>>;
  // 64 query rows on 4 warps, and 128 on 8 (two warpgroups on sm_90a).
  CompileOptions w8;
  w8.num_warps = 8;
  auto k64 = compile<ops::AttentionPrefill<D, 64, 64, HD, CAUSAL>>(kCpu);
  auto k128 = compile<ops::AttentionPrefill<D, 128, 64, HD, CAUSAL>>(kCpu, w8);
  const int B = 2, H = 2, C = H * HD, Tmax = 160;
  std::vector<int32_t> start{0, 70}, length{70, 130};
  const int rows = 200;
  auto qkv = test::random_vector<T>(std::size_t(rows) * 3 * C, 71);
  // The caches hold the prompt's keys and values (as kv_write leaves them).
  std::vector<T> kc(std::size_t(B) * Tmax * C, T(0.f)), vc = kc;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < length[b]; ++t)
      for (int c = 0; c < C; ++c) {
        std::size_t row = std::size_t(start[b] + t) * 3 * C;
        kc[(std::size_t(b) * Tmax + t) * C + c] = qkv[row + C + c];
        vc[(std::size_t(b) * Tmax + t) * C + c] = qkv[row + 2 * C + c];
      }
  Mem dqkv(qkv);
  Mem dkc(kc);
  Mem dvc(vc);
  Mem dstart(start);
  Mem dlength(length);
  const float scale = 0.125f;
  std::vector<double> want(std::size_t(rows) * C);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < length[b]; ++i) {
        auto at = [&](int t, int part, int d) {
          return double(float(qkv[std::size_t(start[b] + t) * 3 * C + part * C + h * HD + d]));
        };
        std::vector<double> sc;
        double top = -1e300, z = 0;
        const int last = CAUSAL ? i : length[b] - 1;
        for (int j = 0; j <= last; ++j) {
          double s = 0;
          for (int d = 0; d < HD; ++d)
            s += at(i, 0, d) * at(j, 1, d);
          sc.push_back(s * scale);
          top = std::max(top, sc.back());
        }
        for (double s : sc)
          z += std::exp(s - top);
        for (int d = 0; d < HD; ++d) {
          double o = 0;
          for (int j = 0; j <= last; ++j)
            o += std::exp(sc[std::size_t(j)] - top) / z * at(j, 2, d);
          want[std::size_t(start[b] + i) * C + h * HD + d] = o;
        }
      }
  double tol = std::is_same_v<T, half> ? 1e-2 : std::is_same_v<T, bfloat16> ? 4e-2 : 1e-5;
  auto run = [&](const auto &k, int bm) {
    std::vector<T> out(std::size_t(rows) * C, T(-7.f));
    Mem dout(out);
    k.launch(Grid(ceil_div(130, bm), H, B), dqkv(), dkc(), dvc(), dout(), dstart(), dlength(), C, Tmax,
             scale);
    check(dout.fetch(), want, tol, tol);
  };
  run(k64, 64);
  run(k128, 128);
}

TEST_CASE_TEMPLATE("prefill attention matches causal softmax attention", T, float, half, bfloat16) {
  check_prefill_attention<T, true>();
}

TEST_CASE_TEMPLATE("prefill attention without the causal mask attends to every key", T, float, half) {
  // Lengths 70 and 130: whole key blocks unmasked, then a partial one.
  check_prefill_attention<T, false>();
}

// 16-bit only: f32 tiles of 128-wide heads exceed a GPU's shared memory.
TEST_CASE_TEMPLATE("prefill attention with 128-wide heads", T, half, bfloat16) {
  check_prefill_attention<T, true, 128>();
  check_prefill_attention<T, false, 128>();
}
