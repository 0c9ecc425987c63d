//===- 04_gpu_lowering.cpp - lesson 4: the same kernel for the GPU --------===//
//
// What this teaches: a kernel is target-independent. Compiled for
// `Target::cuda("sm_90a")` it goes kiln -> kiln with a layout on every tile
// (`#kiln.blocked`, `#kiln.mma`, ...: which elements each thread holds,
// chosen by the layout passes; KILN_PRINT_IR_AFTER_ALL=1 shows them) ->
// gpu.func (`lowered`: each tile becomes the elements one thread holds; loads
// are 128-bit where addresses are consecutive) -> NVVM (`llvm-dialect`) ->
// LLVM IR -> PTX. Compiling needs no GPU; running does: with one, the kernel runs
// and is checked against the CPU build of the same kernel.
//
//===----------------------------------------------------------------------===//
#include "lesson.hpp"

#include "kiln/ops/softmax.hpp"
#include "kiln/runtime/cuda.hpp"

#include <cmath>

using namespace kiln;

int main(int argc, char **argv) {
  return lesson::run(argc, argv, "lesson 4: lowering for the GPU", [](const lesson::Options &o) {
    using Kernel = ops::Softmax<f16, 1024, true>;
    auto gpu = compile<Kernel>(Target::cuda("sm_90a"));
    std::printf("compiled %s for sm_90a in %.0f ms%s; PTX is %zu bytes\n", gpu.name().c_str(),
                gpu.compile_seconds() * 1e3, gpu.from_cache() ? " (kernel cache hit)" : "",
                gpu.ir(Stage::Ptx).size());
    lesson::show_ir(o, gpu);

    std::string why;
    if (!cuda::available(&why)) {
      std::printf("not running it: %s\n", why.c_str());
      return 0;
    }
    const int rows = 64, cols = 1000;
    std::vector<half> x(rows * cols), y_cpu(rows * cols);
    for (int i = 0; i < rows * cols; ++i)
      x[i] = half(float((i * 37) % 101) / 10.f);
    compile<Kernel>(Target::cpu()).launch(Grid(rows), x.data(), y_cpu.data(), cols, cols, cols);
    cuda::DeviceBuffer<half> dx(x), dy(rows * cols);
    gpu.launch(Grid(rows), dx.data(), dy.data(), cols, cols, cols);
    auto y = dy.download();
    double worst = 0;
    for (int i = 0; i < rows * cols; ++i)
      worst = std::max(worst, std::fabs(double(float(y[i])) - double(float(y_cpu[i]))));
    std::printf("ran on %s: max difference to the CPU result %.2e\n", cuda::device_name().c_str(), worst);
    return worst < 1e-3 ? 0 : 1;
  });
}
