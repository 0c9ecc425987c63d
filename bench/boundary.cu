// boundary.cu - what a decode step pays per kernel boundary, against a
// grid-wide barrier inside one persistent kernel.
//
// A chain of P dependent products y = W_p x (fp16, one warp an output row,
// distinct weights, more than L2 in all), run three ways, each captured in a
// CUDA graph and replayed:
//   chain      one kernel a product, stream order
//   chain+pdl  one kernel a product, programmatic dependent launch (the
//              weights are loaded before griddepcontrol.wait)
//   persistent one kernel for all P products, a grid-wide barrier between
//              them (the next product's weights loaded before the barrier,
//              or after it)
// and the same with no weights at all (the boundary alone).
//
//   nvcc -O3 -arch=sm_90a -std=c++17 bench/boundary.cu -o boundary && ./boundary
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t err_ = (x);                                                                        \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));            \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

// CUDA's grid.sync algorithm: bit 31 of the counter flips once every block
// has added its share (block 0: 0x80000000 - (n - 1), the others 1).
__device__ __forceinline__ void grid_barrier(unsigned *counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned nb = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    unsigned old, cur;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(counter), "r"(nb)
                 : "memory");
    do {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(cur) : "l"(counter) : "memory");
    } while (((old ^ cur) & 0x80000000u) == 0);
  }
  __syncthreads();
}

// One warp's row: K halves, VEC = K / 256 16-byte loads a lane.
template <int K> struct Row {
  static constexpr int VEC = K / 256;
  uint4 w[VEC];
  __device__ void load(const half *W, int n) {
    const uint4 *r = reinterpret_cast<const uint4 *>(W + size_t(n) * K);
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      w[i] = __ldcs(r + threadIdx.x % 32 + 32 * i);
  }
  __device__ float dot(const half *x) const {
    const uint4 *xr = reinterpret_cast<const uint4 *>(x);
    float acc = 0;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      uint4 xv = __ldcg(xr + threadIdx.x % 32 + 32 * i);
      const half2 *a = reinterpret_cast<const half2 *>(&w[i]);
      const half2 *b = reinterpret_cast<const half2 *>(&xv);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 fa = __half22float2(a[j]), fb = __half22float2(b[j]);
        acc += fa.x * fb.x + fa.y * fb.y;
      }
    }
#pragma unroll
    for (int o = 16; o; o >>= 1)
      acc += __shfl_xor_sync(~0u, acc, o);
    return acc;
  }
};

// One product; a warp an output row. K == N here so that x and y alternate.
template <int K, bool PDL, bool WEIGHTS>
__global__ void product(const half *W, const half *x, half *y) {
  if (PDL)
    pdl_launch();
  int n = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  Row<K> r;
  if (WEIGHTS && n < K)
    r.load(W, n);
  if (PDL)
    pdl_wait();
  if (n >= K)
    return;
  float v = WEIGHTS ? r.dot(x) : __half2float(__ldcg(x + n));
  if (threadIdx.x % 32 == 0)
    y[n] = __float2half(v * 0.03f + 0.01f);
}

// All P products in one kernel, a grid barrier between them; each warp its
// rows n = warp + i * warps (R at most).
template <int K, int R, bool PRELOAD, bool WEIGHTS>
__global__ void persistent(const half *W, int distinct, half *buf, int P, unsigned *counter) {
  int warps = gridDim.x * blockDim.x / 32;
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  Row<K> r[R];
  auto loadAll = [&](int p) {
    const half *Wp = W + size_t(p % distinct) * K * K;
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (WEIGHTS && warp + i * warps < K)
        r[i].load(Wp, warp + i * warps);
  };
  if (PRELOAD)
    loadAll(0);
  for (int p = 0; p < P; ++p) {
    const half *x = buf + (p % 2) * K;
    half *y = buf + ((p + 1) % 2) * K;
    if (!PRELOAD)
      loadAll(p);
    float v[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      int n = warp + i * warps;
      v[i] = n < K ? (WEIGHTS ? r[i].dot(x) : __half2float(__ldcg(x + n))) : 0.f;
    }
    if (PRELOAD && p + 1 < P)
      loadAll(p + 1);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      int n = warp + i * warps;
      if (n < K && threadIdx.x % 32 == 0)
        y[n] = __float2half(v[i] * 0.03f + 0.01f);
    }
    grid_barrier(counter);
  }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  template <class F> float us(cudaStream_t s, F f, int reps = 20) {
    f();
    CK(cudaStreamSynchronize(s));
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      CK(cudaEventRecord(a, s));
      f();
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

template <int K, int R> void run(int P, int sms) {
  constexpr int distinct = 48 * 768 * 768 / (K * K) < 8 ? 8 : 48 * 768 * 768 / (K * K);
  size_t wbytes = size_t(distinct) * K * K * sizeof(half);
  half *W, *buf;
  unsigned *counter;
  CK(cudaMalloc(&W, wbytes));
  CK(cudaMalloc(&buf, 2 * K * sizeof(half)));
  CK(cudaMalloc(&counter, sizeof(unsigned)));
  CK(cudaMemset(W, 0x11, wbytes));
  CK(cudaMemset(buf, 0, 2 * K * sizeof(half)));
  CK(cudaMemset(counter, 0, sizeof(unsigned)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer timer;
  double bytes = double(P) * K * K * 2;

  auto chain = [&](auto kernel, bool pdl) {
    cudaGraph_t g;
    cudaGraphExec_t e;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int p = 0; p < P; ++p) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(K * 32 / 256);
      cfg.blockDim = dim3(256);
      cfg.stream = s;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at;
      cfg.numAttrs = pdl ? 1 : 0;
      const half *Wp = W + size_t(p % distinct) * K * K;
      CK(cudaLaunchKernelEx(&cfg, kernel, Wp, (const half *)(buf + (p % 2) * K),
                            buf + ((p + 1) % 2) * K));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&e, g, 0));
    float t = timer.us(s, [&] { CK(cudaGraphLaunch(e, s)); });
    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(g));
    return t;
  };
  auto persist = [&](auto kernel, int blocksPerSm) {
    int blocks = sms * blocksPerSm, fit = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, 256, 0));
    if (fit < blocksPerSm || (blocks * 256 / 32) * R < K)
      return -1.f; // not co-resident (a barrier would hang), or too few warps
    cudaGraph_t g;
    cudaGraphExec_t e;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    kernel<<<blocks, 256, 0, s>>>(W, distinct, buf, P, counter);
    CK(cudaGetLastError());
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&e, g, 0));
    float t = timer.us(s, [&] { CK(cudaGraphLaunch(e, s)); });
    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(g));
    return t;
  };
  auto line = [&](const char *what, float t, bool w) {
    if (t < 0)
      return;
    std::printf("%-5d %-5d %-28s %9.1f us %7.2f us/phase", K, P, what, t, t / P);
    if (w)
      std::printf(" %7.0f GB/s", bytes / (t * 1e-6) / 1e9);
    std::printf("\n");
  };
  line("chain", chain(product<K, false, true>, false), true);
  line("chain+pdl", chain(product<K, true, true>, true), true);
  line("chain, no weights", chain(product<K, false, false>, false), false);
  line("chain+pdl, no weights", chain(product<K, true, false>, true), false);
  for (int b = 1; b <= 2; ++b) {
    char name[64];
    std::snprintf(name, sizeof name, "persistent x%d preload", b);
    line(name, persist(persistent<K, R, true, true>, b), true);
    std::snprintf(name, sizeof name, "persistent x%d", b);
    line(name, persist(persistent<K, R, false, true>, b), true);
    std::snprintf(name, sizeof name, "persistent x%d, no weights", b);
    line(name, persist(persistent<K, R, false, false>, b), false);
  }
  CK(cudaFree(W));
  CK(cudaFree(buf));
  CK(cudaFree(counter));
  CK(cudaStreamDestroy(s));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d multiprocessors, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  std::printf("K=N   P     variant                      graph time   per phase   weights\n");
  int sms = prop.multiProcessorCount;
  run<768, 1>(64, sms);
  run<1536, 2>(64, sms);
  run<3072, 3>(32, sms);
}
