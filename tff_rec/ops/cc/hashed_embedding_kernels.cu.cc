// CUDA kernels of the hashed embedding lookup and its gradient, written
// against raw pointers so that cuda_harness.cu can test them without
// TensorFlow. One thread per output element (id, col); the gradient writes
// each element's slot and signed value (no atomics, nothing m-sized).
#include <cuda_runtime.h>

#include "hashed_embedding.h"

namespace tff_rec {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t elements) {
  return static_cast<int>((elements + kThreads - 1) / kThreads);
}

template <typename Tid>
__global__ void LookupKernel(const float* memory, uint64_t m, const Tid* ids,
                             int64_t elements, int64_t dim, int64_t chunk,
                             HashParams p, float* out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       e < elements; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t slot;
    float sign;
    Locate(p, static_cast<uint64_t>(ids[e / dim]), e % dim, dim, chunk, m, &slot, &sign);
    out[e] = sign * memory[slot];
  }
}

template <typename Tid>
__global__ void LookupGradKernel(const float* grad, const Tid* ids, int64_t elements,
                                 int64_t dim, int64_t chunk, uint64_t m, HashParams p,
                                 int64_t* slots, float* values) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       e < elements; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t slot;
    float sign;
    Locate(p, static_cast<uint64_t>(ids[e / dim]), e % dim, dim, chunk, m, &slot, &sign);
    slots[e] = static_cast<int64_t>(slot);
    values[e] = sign * grad[e];
  }
}

}  // namespace

template <typename Tid>
int LaunchLookupGpu(const float* memory, uint64_t m, const Tid* ids, int64_t n,
                    int64_t dim, int64_t chunk, const HashParams& p, float* out,
                    void* stream) {
  const int64_t elements = n * dim;
  if (elements == 0) return 0;
  LookupKernel<Tid><<<Blocks(elements), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      memory, m, ids, elements, dim, chunk, p, out);
  return static_cast<int>(cudaGetLastError());
}

template <typename Tid>
int LaunchLookupGradGpu(const float* grad, const Tid* ids, int64_t n, int64_t dim,
                        int64_t chunk, uint64_t m, const HashParams& p, int64_t* slots,
                        float* values, void* stream) {
  const int64_t elements = n * dim;
  if (elements == 0) return 0;
  LookupGradKernel<Tid><<<Blocks(elements), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      grad, ids, elements, dim, chunk, m, p, slots, values);
  return static_cast<int>(cudaGetLastError());
}

#define INSTANTIATE(Tid)                                                         \
  template int LaunchLookupGpu<Tid>(const float*, uint64_t, const Tid*, int64_t, \
                                    int64_t, int64_t, const HashParams&, float*, \
                                    void*);                                      \
  template int LaunchLookupGradGpu<Tid>(const float*, const Tid*, int64_t,       \
                                        int64_t, int64_t, uint64_t,              \
                                        const HashParams&, int64_t*, float*, void*);
INSTANTIATE(int32_t)
INSTANTIATE(int64_t)
#undef INSTANTIATE

}  // namespace tff_rec
