//===- test_trace.cpp - tracing C++ kernels into kiln IR ------------------===//
#include <doctest/doctest.h>

#include "kiln/kiln.hpp"
#include "kiln/ops/softmax.hpp"

#include <filesystem>

using namespace kiln;

namespace {
struct Scale {
  void operator()(Ptr<f32> x, F32 s, I32 n) const {
    auto offs = arange<64>();
    auto m = offs < n;
    store(x + offs, load(x + offs, m) * s, m);
  }
};

struct Loop {
  void operator()(Ptr<f32> x, I32 n) const {
    auto acc = for_range(0, n, 16, zeros<f32, 16>(), [&](I32 i, Tile<f32, 16> acc) {
      return acc + load(x + i + arange<16>());
    });
    store(x + arange<16>(), acc);
  }
};

struct TwoD {
  void operator()(Ptr<f16> a, Ptr<f32> out) const {
    auto rows = expand_dims<1>(arange<16>()); // (16, 1)
    auto cols = expand_dims<0>(arange<32>()); // (1, 32)
    auto t = load(a + rows * 32 + cols);       // (16, 32)
    auto m = max<1>(cast<f32>(t));            // (16)
    store(out + arange<16>(), m);
    store(out + 16, cast<f32>(argmax(m)));
  }
};

struct Throws {
  void operator()(Ptr<f32> x) const { throw Error("user error while tracing"); }
};

std::string kilnIR(const CompiledKernel &k) { return k.ir(Stage::Kiln); }
} // namespace

TEST_CASE("a kernel traces to kiln ops with its signature") {
  auto k = compile<Scale>(Target::cpu());
  std::string ir = kilnIR(k);
  CHECK(k.name() == "Scale");
  CHECK(ir.find("func.func @Scale(%arg0: !kiln.ptr<f32>, %arg1: f32, %arg2: i32)") != std::string::npos);
  CHECK(ir.find("kiln.kernel") != std::string::npos);
  CHECK(ir.find("kiln.make_range 0 to 64 : tensor<64xi32>") != std::string::npos);
  CHECK(ir.find("kiln.load") != std::string::npos);
  CHECK(ir.find("kiln.store") != std::string::npos);
  REQUIRE(k.params().size() == 3);
  CHECK(k.params()[0].is_pointer);
  CHECK(k.params()[1].dtype == DType::F32);
}

TEST_CASE("for_range becomes scf.for carrying the accumulator") {
  auto k = compile<Loop>(Target::cpu());
  std::string ir = kilnIR(k);
  CHECK(ir.find("scf.for") != std::string::npos);
  CHECK(ir.find("iter_args") != std::string::npos);
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i)
    x[i] = float(i);
  k.launch(Grid(1), x.data(), 64);
  // acc[j] = sum over i in {0,16,32,48} of x[i + j] = 4j + 96
  for (int j = 0; j < 16; ++j)
    CHECK(x[j] == float(4 * j + 96));
}

TEST_CASE("2-D tiles, reductions along an axis and argmax") {
  auto k = compile<TwoD>(Target::cpu());
  std::string ir = kilnIR(k);
  CHECK(ir.find("kiln.reduce") != std::string::npos);
  CHECK(ir.find(" max %") != std::string::npos);
  CHECK(ir.find("kiln.argmax") != std::string::npos);
  std::vector<half> a(16 * 32);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 32; ++c)
      a[r * 32 + c] = half(float((r * 7 + c * 13) % 32) + (r == 9 ? 100.f : 0.f));
  std::vector<float> out(17, -1.f);
  k.launch(Grid(1), a.data(), out.data());
  for (int r = 0; r < 16; ++r)
    CHECK(out[r] == 31.f + (r == 9 ? 100.f : 0.f));
  CHECK(out[16] == 9.f);
}

TEST_CASE("kernel names come from the C++ type") {
  auto k = compile<ops::Softmax<f16, 128>>(Target::cpu());
  CHECK(k.name() == "Softmax_f16_128_false");
}

TEST_CASE("every stage's IR is available and unknown stages are an error") {
  auto k = compile<Scale>(Target::cpu());
  CHECK(k.ir(Stage::Lowered).find("linalg.generic") != std::string::npos);
  CHECK(k.ir(Stage::LLVMDialect).find("llvm.func @Scale") != std::string::npos);
  CHECK(k.ir(Stage::LLVMIR).find("define void @Scale") != std::string::npos);
  CHECK_THROWS_WITH_AS(parse_stage("ptx-ish"), doctest::Contains("unknown IR stage 'ptx-ish'"), Error);
}

TEST_CASE("an error thrown while tracing leaves the tracer usable") {
  CHECK_THROWS_WITH_AS(compile<Throws>(Target::cpu()), "user error while tracing", Error);
  CHECK_NOTHROW(compile<Scale>(Target::cpu()));
}

TEST_CASE("tile operations outside a kernel are an error, not a crash") {
  CHECK_THROWS_WITH_AS(arange<8>(), doctest::Contains("outside of kernel tracing"), Error);
}

TEST_CASE("IR is dumped to a directory when asked") {
  auto dir = std::filesystem::temp_directory_path() / "kiln-dump-test";
  std::filesystem::remove_all(dir);
  CompileOptions opts;
  opts.dump_dir = dir.string();
  auto k = compile<Scale>(Target::cpu(), opts);
  CHECK(std::filesystem::exists(dir / "Scale.kiln.mlir"));
  CHECK(std::filesystem::exists(dir / "Scale.llvm.ll"));
  std::filesystem::remove_all(dir);
}
