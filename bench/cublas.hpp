//===- cublas.hpp - cuBLAS / cuBLASLt baselines, loaded at run time -------===//
//
// The benchmark binary times cuBLAS in the same process as kiln's kernels.
// The libraries are opened with dlopen so that kiln_bench builds (and
// starts) without them; only the headers are needed at build time.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/runtime/cuda.hpp"

#include <cublasLt.h>
#include <cublas_api.h>

#include <dlfcn.h>
#include <stdexcept>
#include <string>

namespace bench {

class Cublas {
public:
  Cublas() {
    for (const char *name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((blas_ = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    for (const char *name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"})
      if ((lt_ = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!blas_ || !lt_)
      throw std::runtime_error("cuBLAS libraries not found");
    load(blas_, create_, "cublasCreate_v2");
    load(blas_, gemm_, "cublasGemmEx");
    load(blas_, setStream_, "cublasSetStream_v2");
    load(lt_, ltCreate_, "cublasLtCreate");
    load(lt_, descCreate_, "cublasLtMatmulDescCreate");
    load(lt_, descSet_, "cublasLtMatmulDescSetAttribute");
    load(lt_, layoutCreate_, "cublasLtMatrixLayoutCreate");
    load(lt_, matmul_, "cublasLtMatmul");
    check(create_(&handle_), "cublasCreate");
    check(ltCreate_(&ltHandle_), "cublasLtCreate");
    workspace_ = kiln::cuda::malloc_device(kWorkspace);
  }

  /// Where cublasGemmEx launches (a kiln::cuda::Stream's handle; null: the
  /// default stream), e.g. to capture it in a CUDA graph.
  void set_stream(void *stream) {
    check(setStream_(handle_, static_cast<cudaStream_t>(stream)), "cublasSetStream");
  }

  /// C(M, N) = A(M, K) @ B(K, N), row-major fp16 (or `type`), fp32
  /// accumulation (cublasGemmEx).
  void matmul(const void *a, const void *b, void *c, int M, int N, int K, cudaDataType type = CUDA_R_16F) {
    float alpha = 1, beta = 0;
    // Row-major C = A B is column-major C^T = B^T A^T.
    check(gemm_(handle_, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b, type, N, a, type, K, &beta, c, type, N,
                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

  /// C(M, N) = A(M, K) @ B(K, N), row-major f32 on tensor cores with TF32
  /// operands (CUBLAS_COMPUTE_32F_FAST_TF32); with `bt`, `b` holds B
  /// transposed, (N, K) row-major.
  void matmul_tf32(const void *a, const void *b, void *c, int M, int N, int K, bool bt) {
    float alpha = 1, beta = 0;
    check(gemm_(handle_, bt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b, CUDA_R_32F, bt ? K : N,
                a, CUDA_R_32F, K, &beta, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (TF32)");
  }

  /// C = gelu_tanh(A @ B + bias) with cuBLASLt's fused GELU_BIAS epilogue.
  void matmul_bias_gelu(const void *a, const void *b, const void *bias, void *c, int M, int N, int K) {
    cublasLtMatmulDesc_t desc;
    check(descCreate_(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    check(descSet_(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    check(descSet_(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "bias");
    cublasLtMatrixLayout_t la, lb, lc;
    check(layoutCreate_(&la, CUDA_R_16F, N, K, N), "layout B^T");
    check(layoutCreate_(&lb, CUDA_R_16F, K, M, K), "layout A^T");
    check(layoutCreate_(&lc, CUDA_R_16F, N, M, N), "layout C^T");
    float alpha = 1, beta = 0;
    check(matmul_(ltHandle_, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, nullptr, workspace_,
                  kWorkspace, static_cast<cudaStream_t>(kiln::cuda::current_stream())),
          "cublasLtMatmul");
  }

private:
  static constexpr size_t kWorkspace = 32u << 20;
  template <class F> void load(void *lib, F &fn, const char *name) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (!fn)
      throw std::runtime_error(std::string("cuBLAS entry point missing: ") + name);
  }
  static void check(int status, const char *what) {
    if (status != 0)
      throw std::runtime_error(std::string(what) + " failed with status " + std::to_string(status));
  }
  void *blas_ = nullptr, *lt_ = nullptr, *workspace_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t ltHandle_ = nullptr;
  decltype(&::cublasCreate_v2) create_ = nullptr;
  decltype(&::cublasSetStream_v2) setStream_ = nullptr;
  // The C entry point (the header also declares a C++ overload).
  cublasStatus_t (*gemm_)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                          const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                          int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                          cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasLtCreate) ltCreate_ = nullptr;
  decltype(&::cublasLtMatmulDescCreate) descCreate_ = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) descSet_ = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layoutCreate_ = nullptr;
  decltype(&::cublasLtMatmul) matmul_ = nullptr;
};

} // namespace bench
