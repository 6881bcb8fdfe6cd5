// Standalone check of the CUDA kernels against the CPU reference, no
// TensorFlow needed:
//   nvcc -O2 -x cu -o harness cuda_harness.cu hashed_embedding_kernels.cu.cc && ./harness
// Forward values, gradient slots and gradient values must match exactly.
// Ids include 0 and the largest int64 rows (edges).
#include <cuda_runtime.h>

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

  const int64_t elements = n * dim;
  std::vector<float> want(elements), want_values(elements);
  std::vector<int64_t> want_slots(elements);
  tff_rec::LookupCpu<int64_t>(memory.data(), m, ids.data(), 0, n, dim, chunk, p, want.data());
  tff_rec::LookupGradCpu<int64_t>(grad.data(), ids.data(), 0, n, dim, chunk, m, p,
                                  want_slots.data(), want_values.data());

  float *d_memory, *d_out, *d_grad, *d_values;
  int64_t *d_ids, *d_slots;
  CHECK_CUDA(cudaMalloc(&d_memory, m * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_out, elements * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_grad, elements * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_values, elements * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_slots, elements * sizeof(int64_t)));
  CHECK_CUDA(cudaMalloc(&d_ids, n * sizeof(int64_t)));
  CHECK_CUDA(cudaMemcpy(d_memory, memory.data(), m * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_grad, grad.data(), elements * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_ids, ids.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
  CHECK_CUDA(static_cast<cudaError_t>(tff_rec::LaunchLookupGpu<int64_t>(
      d_memory, m, d_ids, n, dim, chunk, p, d_out, nullptr)));
  CHECK_CUDA(static_cast<cudaError_t>(tff_rec::LaunchLookupGradGpu<int64_t>(
      d_grad, d_ids, n, dim, chunk, m, p, d_slots, d_values, nullptr)));
  std::vector<float> got(elements), got_values(elements);
  std::vector<int64_t> got_slots(elements);
  CHECK_CUDA(cudaMemcpy(got.data(), d_out, elements * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got_values.data(), d_values, elements * sizeof(float),
                        cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got_slots.data(), d_slots, elements * sizeof(int64_t),
                        cudaMemcpyDeviceToHost));
  cudaFree(d_memory); cudaFree(d_out); cudaFree(d_grad); cudaFree(d_values);
  cudaFree(d_slots); cudaFree(d_ids);

  int64_t forward_mismatches = 0, gradient_mismatches = 0;
  for (int64_t e = 0; e < elements; ++e) {
    forward_mismatches += got[e] != want[e];
    gradient_mismatches += got_slots[e] != want_slots[e] || got_values[e] != want_values[e];
  }
  const bool ok = forward_mismatches == 0 && gradient_mismatches == 0;
  std::printf("%s n=%lld dim=%lld chunk=%lld m=%llu: forward mismatches %lld, "
              "gradient (slot, value) mismatches %lld\n", ok ? "PASS" : "FAIL",
              static_cast<long long>(n), static_cast<long long>(dim),
              static_cast<long long>(chunk), static_cast<unsigned long long>(m),
              static_cast<long long>(forward_mismatches),
              static_cast<long long>(gradient_mismatches));
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
