// Standalone check of the CUDA kernels against the CPU reference, no
// TensorFlow needed:
//   nvcc -O2 -x cu -o harness cuda_harness.cu hashed_embedding_kernels.cu.cc && ./harness
// Forward values must match exactly; gradients to float rounding (atomicAdd
// sums in another order). Ids include 0 and the largest int64 rows (edges).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "hashed_embedding.h"

using tff_rec::HashParams;

namespace {

#define CHECK_CUDA(call)                                                  \
  do {                                                                    \
    cudaError_t e = (call);                                               \
    if (e != cudaSuccess) {                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e),      \
                  __FILE__, __LINE__);                                    \
      return false;                                                       \
    }                                                                     \
  } while (0)

bool RunCase(int64_t n, int64_t dim, int64_t chunk, uint64_t m, int64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> memory(m), grad(n * dim);
  std::vector<int64_t> ids(n);
  std::normal_distribution<float> normal;
  for (auto& v : memory) v = normal(rng);
  for (auto& v : grad) v = normal(rng);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(rng() % 100000);
  ids[0] = 0;
  ids[n - 1] = std::numeric_limits<int64_t>::max() / dim;  // key near 2^63
  ids[n / 2] = ids[1];                                       // repeated id
  const HashParams p = tff_rec::ParamsFromSeed(seed);

  std::vector<float> want(n * dim), want_grad(m, 0.0f);
  tff_rec::LookupCpu<int64_t>(memory.data(), m, ids.data(), 0, n, dim, chunk, p, want.data());
  tff_rec::LookupGradCpu<int64_t>(grad.data(), ids.data(), n, dim, chunk, m, p,
                                  want_grad.data());

  float *d_memory, *d_out, *d_grad, *d_memory_grad;
  int64_t* d_ids;
  CHECK_CUDA(cudaMalloc(&d_memory, m * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_out, n * dim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_grad, n * dim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_memory_grad, m * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_ids, n * sizeof(int64_t)));
  CHECK_CUDA(cudaMemcpy(d_memory, memory.data(), m * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_grad, grad.data(), n * dim * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_ids, ids.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
  CHECK_CUDA(static_cast<cudaError_t>(tff_rec::LaunchLookupGpu<int64_t>(
      d_memory, m, d_ids, n, dim, chunk, p, d_out, nullptr)));
  CHECK_CUDA(static_cast<cudaError_t>(tff_rec::LaunchLookupGradGpu<int64_t>(
      d_grad, d_ids, n, dim, chunk, m, p, d_memory_grad, nullptr)));
  std::vector<float> got(n * dim), got_grad(m);
  CHECK_CUDA(cudaMemcpy(got.data(), d_out, n * dim * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got_grad.data(), d_memory_grad, m * sizeof(float),
                        cudaMemcpyDeviceToHost));
  cudaFree(d_memory); cudaFree(d_out); cudaFree(d_grad); cudaFree(d_memory_grad); cudaFree(d_ids);

  int64_t forward_mismatches = 0;
  for (int64_t i = 0; i < n * dim; ++i) forward_mismatches += got[i] != want[i];
  double worst = 0.0;
  for (uint64_t s = 0; s < m; ++s) {
    worst = std::fmax(worst, std::fabs(got_grad[s] - want_grad[s]) /
                                 (1.0 + std::fabs(want_grad[s])));
  }
  const bool ok = forward_mismatches == 0 && worst < 1e-4;
  std::printf("%s n=%lld dim=%lld chunk=%lld m=%llu: forward mismatches %lld, "
              "worst relative grad error %.2e\n", ok ? "PASS" : "FAIL",
              static_cast<long long>(n), static_cast<long long>(dim),
              static_cast<long long>(chunk), static_cast<unsigned long long>(m),
              static_cast<long long>(forward_mismatches), worst);
  return ok;
}

}  // namespace

int main() {
  bool ok = true;
  ok &= RunCase(32768, 16, 0, 10007, 1);
  ok &= RunCase(32768, 16, 4, 1 << 20, 2);
  ok &= RunCase(1000, 8, 0, 1, 3);               // a single slot
  ok &= RunCase(4096, 32, 8, 10000000, 4);
  std::printf("%s\n", ok ? "ALL PASS" : "SOME FAILED");
  return ok ? 0 : 1;
}
