// Benchmark (not a test): how fast the cuBLASLt algorithms its heuristic offers run the LTX-Video
// block's projections, against the heuristic's first choice (what torch's addmm gets).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/gemm_algos.cu -lcublasLt -o /tmp/gemm_algos
//   /tmp/gemm_algos [algos=32] [iters=50]
//
// Each shape is y[M, N] = x[M, K] @ W[N, K]^T + bias[N] in bf16 with fp32 accumulation, as
// torch's F.linear calls cuBLASLt (transa = T, column-major m = N, n = M), with the bias (or
// GELU-tanh + bias) in the epilogue. For each algorithm the heuristic returns, it prints the
// median of `iters` timed calls (CUDA events around each, after 5 warm-up calls), TFLOP/s and
// the algorithm's tile, stages, split-K and swizzle, and at the end the step time of the LTX
// block's projections (28 blocks) with the first algorithm and with the fastest.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define CHECK_LT(x)                                                                \
  do {                                                                             \
    cublasStatus_t s_ = (x);                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                             \
      std::fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

struct Shape {
  const char* name;
  int m_rows;  // tokens (torch's M)
  int n_out;   // output features
  int k_in;    // input features
  bool gelu;
  int per_block;
};

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65535.0f - 0.5f) * 0.1f);
  }
}

int main(int argc, char** argv) {
  const int want = argc > 1 ? std::atoi(argv[1]) : 32;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  const int tokens = 2 * 7 * 16 * 24;  // CFG batch 2 x 2688 latent tokens
  const Shape shapes[] = {
      {"qkv (fused)", tokens, 6144, 2048, false, 1},
      {"attn out / cross q / cross out", tokens, 2048, 2048, false, 3},
      {"ff up + gelu", tokens, 8192, 2048, true, 1},
      {"ff down", tokens, 2048, 8192, false, 1},
  };
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, cuBLASLt %zu\n", prop.name, prop.multiProcessorCount, cublasLtGetVersion());

  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  const size_t workspace_bytes = 32u << 20;
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  double step_first = 0, step_best = 0;

  for (const Shape& s : shapes) {
    const size_t nx = (size_t)s.m_rows * s.k_in, nw = (size_t)s.n_out * s.k_in, ny = (size_t)s.m_rows * s.n_out;
    __nv_bfloat16 *x, *w, *y, *bias;
    CHECK_CUDA(cudaMalloc(&x, nx * 2));
    CHECK_CUDA(cudaMalloc(&w, nw * 2));
    CHECK_CUDA(cudaMalloc(&y, ny * 2));
    CHECK_CUDA(cudaMalloc(&bias, s.n_out * 2));
    fill<<<(nx + 255) / 256, 256>>>(x, nx, 1);
    fill<<<(nw + 255) / 256, 256>>>(w, nw, 2);
    fill<<<(s.n_out + 255) / 256, 256>>>(bias, s.n_out, 3);
    CHECK_CUDA(cudaDeviceSynchronize());

    cublasLtMatmulDesc_t op;
    CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtEpilogue_t epi = s.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    cudaDataType_t bias_type = CUDA_R_16BF;
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    // Column-major: A = W as K x N (op T), B = x as K x M, C = y as N x M.
    cublasLtMatrixLayout_t la, lb, lc;
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k_in, s.n_out, s.k_in));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k_in, s.m_rows, s.k_in));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.n_out, s.m_rows, s.n_out));
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                  sizeof(workspace_bytes)));
    std::vector<cublasLtMatmulHeuristicResult_t> found(want);
    int got = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, want, found.data(), &got));
    const float alpha = 1.f, beta = 0.f;
    const double flop = 2.0 * s.m_rows * s.n_out * s.k_in;
    std::printf("\n== %s: M=%d N=%d K=%d%s, %d algorithms\n", s.name, s.m_rows, s.n_out, s.k_in,
                s.gelu ? " gelu+bias" : " bias", got);
    std::printf("%4s %10s %8s %6s %6s %6s %6s %6s\n", "#", "us", "TFLOP/s", "tile", "stages", "splitK", "swizzle", "ctaSwz");
    float first = 0, best = 1e30f;
    int best_i = -1;
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < got; ++i) {
      const cublasLtMatmulAlgo_t* algo = &found[i].algo;
      auto call = [&]() {
        return cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, algo, workspace, workspace_bytes, stream);
      };
      if (call() != CUBLAS_STATUS_SUCCESS) {
        std::printf("%4d   (failed)\n", i);
        continue;
      }
      for (int r = 0; r < 4; ++r) call();
      std::vector<float> t;
      for (int r = 0; r < iters; ++r) {
        CHECK_CUDA(cudaEventRecord(a, stream));
        call();
        CHECK_CUDA(cudaEventRecord(b, stream));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.f);
      }
      const float us = median(t);
      int tile = -1, stages = -1, split = -1, swz = -1, cta = -1;
      size_t w_;
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w_);
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w_);
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split), &w_);
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &swz, sizeof(swz), &w_);
      cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &cta, sizeof(cta), &w_);
      std::printf("%4d %10.1f %8.1f %6d %6d %6d %6d %6d\n", i, us, flop / us * 1e-6, tile, stages, split, swz, cta);
      if (i == 0) first = us;
      if (us < best) best = us, best_i = i;
    }
    std::printf("first %.1f us, fastest #%d %.1f us (%.3fx)\n", first, best_i, best, first / best);
    step_first += 28.0 * s.per_block * first;
    step_best += 28.0 * s.per_block * best;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    cudaFree(x);
    cudaFree(w);
    cudaFree(y);
    cudaFree(bias);
  }
  std::printf("\nLTX step, these projections x 28 blocks: heuristic's first %.2f ms, fastest each %.2f ms\n",
              step_first / 1000, step_best / 1000);
  return 0;
}
