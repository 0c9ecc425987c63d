//===- test_launch_errors.cpp - bad launches are clear errors -------------===//
#include <doctest/doctest.h>

#include "kiln/kiln.hpp"
#include "kiln/runtime/cuda.hpp"

using namespace kiln;

namespace {
struct Fill {
  void operator()(Ptr<f32> x, F32 v, I32 n) const {
    auto offs = program_id(0) * 32 + arange<32>();
    store(x + offs, full<f32, 32>(0) + v, offs < n);
  }
};
} // namespace

TEST_CASE("type-erased launches check count, kinds, dtypes, null pointers and the grid") {
  auto k = compile<Fill>(Target::cpu());
  std::vector<float> buf(64);
  std::vector<double> wrong(64);
  auto ptr = KernelArg::pointer(buf.data());
  auto val = KernelArg::floating(1.5);
  auto n = KernelArg::integer(64);

  std::vector<KernelArg> two{ptr, val};
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), two),
                       "kiln: kernel Fill(ptr<f32>, f32, i32) takes 3 arguments, got 2", Error);
  std::vector<KernelArg> swapped{val, ptr, n};
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), swapped),
                       doctest::Contains("argument 0 of Fill(ptr<f32>, f32, i32): expects a pointer, got a float"),
                       Error);
  std::vector<KernelArg> dtype{KernelArg::pointer(wrong.data()), val, n};
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), dtype),
                       doctest::Contains("expects a pointer to f32, got a pointer to f64"), Error);
  std::vector<KernelArg> null{KernelArg::pointer<float>(nullptr), val, n};
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), null), doctest::Contains("null pointer"), Error);
  std::vector<KernelArg> big{ptr, val, KernelArg::integer(int64_t(1) << 40)};
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), big), doctest::Contains("does not fit in i32"), Error);
  std::vector<KernelArg> ok{ptr, val, n};
  CHECK_THROWS_WITH_AS(k.launch(Grid(0), ok), doctest::Contains("empty grid"), Error);

  k.launch(Grid(2), ok);
  for (float f : buf)
    CHECK(f == 1.5f);
}

TEST_CASE("typed launches reject null pointers at run time") {
  auto k = compile<Fill>(Target::cpu());
  float *none = nullptr;
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), none, 1.0f, 4), doctest::Contains("null pointer"), Error);
  CHECK_THROWS_WITH_AS(k.launch(Grid(1), nullptr, 1.0f, 4), doctest::Contains("null pointer"), Error);
}

TEST_CASE("a CUDA kernel compiles without a GPU; launching it without one is a clear error") {
  auto k = compile<Fill>(Target::cuda("sm_90a"));
  CHECK(k.ir(Stage::Ptx).find(".entry Fill") != std::string::npos);
  std::string why;
  if (!cuda::available(&why)) {
    std::vector<float> buf(64);
    CHECK_THROWS_WITH_AS(k.launch(Grid(1), buf.data(), 1.0f, 64), doctest::Contains("no GPU"), Error);
  }
}

TEST_CASE("GPU compile options out of range are clear errors") {
  CompileOptions warps;
  warps.num_warps = 0;
  CHECK_THROWS_WITH_AS(compile<Fill>(Target::cuda("sm_90a"), warps),
                       doctest::Contains("num_warps must be in [1, 32], got 0"), Error);
  CompileOptions stages;
  stages.num_stages = 9;
  CHECK_THROWS_WITH_AS(compile<Fill>(Target::cuda("sm_90a"), stages),
                       doctest::Contains("num_stages must be in [1, 8], got 9"), Error);
}
