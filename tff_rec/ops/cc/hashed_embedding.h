// Raw-pointer kernels of the hashed embedding lookup and its gradient.
// The CPU functions are the reference: the TF CPU kernels call them, and the
// standalone CUDA harness (cuda_harness.cu) checks the CUDA kernels against
// them without TensorFlow.
#ifndef TFF_REC_OPS_CC_HASHED_EMBEDDING_H_
#define TFF_REC_OPS_CC_HASHED_EMBEDDING_H_

#include <cstdint>

#include "hashing.h"

namespace tff_rec {

// out[i, c] = sign(ids[i], c) * memory[slot(ids[i], c)] for i in [begin, end).
template <typename Tid>
void LookupCpu(const float* memory, uint64_t m, const Tid* ids, int64_t begin,
               int64_t end, int64_t dim, int64_t chunk, const HashParams& p,
               float* out) {
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t row = static_cast<uint64_t>(ids[i]);
    for (int64_t c = 0; c < dim; ++c) {
      uint64_t slot;
      float sign;
      Locate(p, row, c, dim, chunk, m, &slot, &sign);
      out[i * dim + c] = sign * memory[slot];
    }
  }
}

// memory_grad[slot] += sign * grad[i, c] over all i, c (memory_grad zeroed by
// the caller). Sequential, so the sum order (and result) is deterministic.
template <typename Tid>
void LookupGradCpu(const float* grad, const Tid* ids, int64_t n, int64_t dim,
                   int64_t chunk, uint64_t m, const HashParams& p,
                   float* memory_grad) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t row = static_cast<uint64_t>(ids[i]);
    for (int64_t c = 0; c < dim; ++c) {
      uint64_t slot;
      float sign;
      Locate(p, row, c, dim, chunk, m, &slot, &sign);
      memory_grad[slot] += sign * grad[i * dim + c];
    }
  }
}

// CUDA launchers (hashed_embedding_kernels.cu.cc). `stream` is a cudaStream_t.
// Return a cudaError_t as int (0: success). The gradient launcher zeroes
// memory_grad first and accumulates with atomicAdd (summation order varies).
template <typename Tid>
int LaunchLookupGpu(const float* memory, uint64_t m, const Tid* ids, int64_t n,
                    int64_t dim, int64_t chunk, const HashParams& p, float* out,
                    void* stream);
template <typename Tid>
int LaunchLookupGradGpu(const float* grad, const Tid* ids, int64_t n, int64_t dim,
                        int64_t chunk, uint64_t m, const HashParams& p,
                        float* memory_grad, void* stream);

}  // namespace tff_rec

#endif  // TFF_REC_OPS_CC_HASHED_EMBEDDING_H_
