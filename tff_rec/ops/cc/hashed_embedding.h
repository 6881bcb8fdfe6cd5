// Raw-pointer kernels of the hashed embedding lookup and its gradient.
// The CPU functions are the reference: the TF CPU kernels call them, and the
// standalone CUDA harness (cuda_harness.cu) checks the CUDA kernels against
// them without TensorFlow. The gradient is sparse (slots and values): an
// optimizer then touches only the slots a step read.
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

// The gradient with respect to memory, sparse: for each element e = (i, c) of
// ids[begin, end) x dim, slots[e] = its slot and values[e] = sign * grad[e]
// (IndexedSlices of the m-float memory; a slot may repeat). Nothing m-sized.
template <typename Tid>
void LookupGradCpu(const float* grad, const Tid* ids, int64_t begin, int64_t end,
                   int64_t dim, int64_t chunk, uint64_t m, const HashParams& p,
                   int64_t* slots, float* values) {
  for (int64_t i = begin; i < end; ++i) {
    const uint64_t row = static_cast<uint64_t>(ids[i]);
    for (int64_t c = 0; c < dim; ++c) {
      uint64_t slot;
      float sign;
      Locate(p, row, c, dim, chunk, m, &slot, &sign);
      slots[i * dim + c] = static_cast<int64_t>(slot);
      values[i * dim + c] = sign * grad[i * dim + c];
    }
  }
}

// CUDA launchers (hashed_embedding_kernels.cu.cc). `stream` is a cudaStream_t.
// Return a cudaError_t as int (0: success). The gradient writes what
// LookupGradCpu writes, for all n ids.
template <typename Tid>
int LaunchLookupGpu(const float* memory, uint64_t m, const Tid* ids, int64_t n,
                    int64_t dim, int64_t chunk, const HashParams& p, float* out,
                    void* stream);
template <typename Tid>
int LaunchLookupGradGpu(const float* grad, const Tid* ids, int64_t n, int64_t dim,
                        int64_t chunk, uint64_t m, const HashParams& p, int64_t* slots,
                        float* values, void* stream);

}  // namespace tff_rec

#endif  // TFF_REC_OPS_CC_HASHED_EMBEDDING_H_
