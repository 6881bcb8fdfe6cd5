// The CUDA kernels against the floor of their access pattern, no TensorFlow:
//   make gpu-check   (or: nvcc -O3 -arch=native -o floor cuda_floor.cu
//                     hashed_embedding_kernels.cu.cc && ./floor)
// A virtual 1,351,679 x 64 table (AmazonProduct-100's items) in a hashed
// memory of 1x, 8x or 64x fewer floats, element mode and chunk modes Z = 8 and
// 32, 262,144 and 4,096 ids a call. Each line times, in the same run:
//   lookup / gradient:  the project's kernels (hashing on the fly; the gradient
//                       is sparse: each element's slot and signed value);
//   dense:              a plain gather of the same output from a dense n x 64
//                       table / the dense gradient such a table takes (zeroed,
//                       then scatter-added);
//   floor:              the same from slots and signs computed beforehand: a
//                       gather (one random read per element), and for the
//                       gradient the slots and signed values written out.
// It guards what is true of the kernels: lookup and gradient within 1.1x of
// the floor, and the sparse gradient of FAIR's step (4,096 ids, 1x memory) at
// most 0.03 ms, nothing m-sized zeroed (exit status 1 otherwise). Times are the mean of kReps calls
// after a warm-up, by CUDA events.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "hashed_embedding.h"

namespace {

constexpr int64_t kRows = 1351679;
constexpr int64_t kDim = 64;
constexpr int kReps = 20;
constexpr int kThreads = 256;
constexpr double kGuard = 1.1;
constexpr int64_t kStepIds = 4096;  // FAIR's ids per step
constexpr float kStepGradientMs = 0.03f;  // the dense m-float gradient took 0.130 ms

#define CHECK_CUDA(call)                                                               \
  do {                                                                                 \
    cudaError_t e = (call);                                                            \
    if (e != cudaSuccess) {                                                            \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

int Blocks(int64_t elements) { return static_cast<int>((elements + kThreads - 1) / kThreads); }

__global__ void DenseGather(const float* table, const int64_t* ids, int64_t elements,
                            float* out) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e < elements) out[e] = table[ids[e / kDim] * kDim + e % kDim];
}

__global__ void DenseScatterAdd(const float* grad, const int64_t* ids, int64_t elements,
                                float* table_grad) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e < elements) atomicAdd(table_grad + ids[e / kDim] * kDim + e % kDim, grad[e]);
}

__global__ void SlotGather(const float* memory, const uint32_t* slots, const float* signs,
                           int64_t elements, float* out) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e < elements) out[e] = signs[e] * memory[slots[e]];
}

__global__ void SlotValues(const float* grad, const uint32_t* slots, const float* signs,
                           int64_t elements, int64_t* out_slots, float* values) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e < elements) {
    out_slots[e] = slots[e];
    values[e] = signs[e] * grad[e];
  }
}

// Mean milliseconds of `call` over kReps, after one warm-up call.
template <typename Call>
float Time(Call call) {
  call();
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  for (int r = 0; r < kReps; ++r) call();
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaGetLastError());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / kReps;
}

template <typename T>
T* Device(const std::vector<T>& host) {
  T* device;
  CHECK_CUDA(cudaMalloc(&device, host.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

}  // namespace

int main() {
  cudaDeviceProp device;
  CHECK_CUDA(cudaGetDeviceProperties(&device, 0));
  std::printf("device: %s; virtual table %lld x %lld; mean of %d calls after a warm-up\n\n",
              device.name, static_cast<long long>(kRows), static_cast<long long>(kDim), kReps);
  const int64_t max_ids = 262144;
  std::mt19937_64 rng(0);
  std::vector<int64_t> ids(max_ids);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % kRows);
  std::vector<float> grad(max_ids * kDim);
  std::normal_distribution<float> normal;
  for (auto& g : grad) g = normal(rng);
  std::vector<float> table(kRows * kDim);  // the 1x memory and the dense table alike
  for (auto& v : table) v = normal(rng);

  int64_t* d_ids = Device(ids);
  float* d_grad = Device(grad);
  float* d_table = Device(table);  // dense table; its first m floats serve as the memory
  float *d_out, *d_table_grad, *d_values;
  int64_t* d_grad_slots;
  CHECK_CUDA(cudaMalloc(&d_out, max_ids * kDim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_table_grad, kRows * kDim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_values, max_ids * kDim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_grad_slots, max_ids * kDim * sizeof(int64_t)));
  uint32_t* d_slots;
  float* d_signs;
  CHECK_CUDA(cudaMalloc(&d_slots, max_ids * kDim * sizeof(uint32_t)));
  CHECK_CUDA(cudaMalloc(&d_signs, max_ids * kDim * sizeof(float)));
  const tff_rec::HashParams p = tff_rec::ParamsFromSeed(1);

  std::printf("| memory | mode | ids | lookup ms | dense gather ms | floor gather ms | "
              "lookup / floor | gradient ms | dense gradient ms | floor gradient ms | "
              "gradient / floor |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  bool ok = true;
  for (int64_t factor : {1, 8, 64}) {
    const uint64_t m = kRows * kDim / factor;
    for (int64_t chunk : {0, 8, 32}) {
      for (int64_t n : {max_ids, kStepIds}) {
        const int64_t elements = n * kDim;
        std::vector<uint32_t> slots(elements);
        std::vector<float> signs(elements);
        for (int64_t e = 0; e < elements; ++e) {
          uint64_t slot;
          tff_rec::Locate(p, static_cast<uint64_t>(ids[e / kDim]), e % kDim, kDim, chunk, m,
                          &slot, &signs[e]);
          slots[e] = static_cast<uint32_t>(slot);
        }
        CHECK_CUDA(cudaMemcpy(d_slots, slots.data(), elements * sizeof(uint32_t),
                              cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(d_signs, signs.data(), elements * sizeof(float),
                              cudaMemcpyHostToDevice));
        const float lookup = Time([&] {
          tff_rec::LaunchLookupGpu<int64_t>(d_table, m, d_ids, n, kDim, chunk, p, d_out,
                                            nullptr);
        });
        const float dense_gather = Time([&] {
          DenseGather<<<Blocks(elements), kThreads>>>(d_table, d_ids, elements, d_out);
        });
        const float floor_gather = Time([&] {
          SlotGather<<<Blocks(elements), kThreads>>>(d_table, d_slots, d_signs, elements,
                                                     d_out);
        });
        const float gradient = Time([&] {
          tff_rec::LaunchLookupGradGpu<int64_t>(d_grad, d_ids, n, kDim, chunk, m, p,
                                                d_grad_slots, d_values, nullptr);
        });
        const float dense_scatter = Time([&] {
          cudaMemsetAsync(d_table_grad, 0, kRows * kDim * sizeof(float));
          DenseScatterAdd<<<Blocks(elements), kThreads>>>(d_grad, d_ids, elements,
                                                          d_table_grad);
        });
        const float floor_scatter = Time([&] {
          SlotValues<<<Blocks(elements), kThreads>>>(d_grad, d_slots, d_signs, elements,
                                                     d_grad_slots, d_values);
        });
        const double lookup_ratio = lookup / floor_gather;
        const double gradient_ratio = gradient / floor_scatter;
        const bool step_fast = !(factor == 1 && n == kStepIds) || gradient <= kStepGradientMs;
        ok &= lookup_ratio <= kGuard && gradient_ratio <= kGuard && step_fast;
        std::printf("| %lldx (%.0f MB) | %s%s | %lld | %.4f | %.4f | %.4f | %.2f%s | %.4f | "
                    "%.4f | %.4f | %.2f%s |\n",
                    static_cast<long long>(factor), m * 4.0 / 1e6,
                    chunk ? "chunk Z=" : "element", chunk ? std::to_string(chunk).c_str() : "",
                    static_cast<long long>(n), lookup, dense_gather, floor_gather,
                    lookup_ratio, lookup_ratio <= kGuard ? "" : " (over 1.1)", gradient,
                    dense_scatter, floor_scatter, gradient_ratio,
                    gradient_ratio <= kGuard ? "" : " (over 1.1)");
        if (!step_fast) {
          std::printf("  ^ the gradient of a %lld-id step at 1x takes %.4f ms, over %.2f\n",
                      static_cast<long long>(kStepIds), gradient, kStepGradientMs);
        }
      }
    }
  }
  cudaFree(d_ids); cudaFree(d_grad); cudaFree(d_table); cudaFree(d_out);
  cudaFree(d_table_grad); cudaFree(d_values); cudaFree(d_grad_slots);
  cudaFree(d_slots); cudaFree(d_signs);
  std::printf("\n%s: lookup and gradient within %.1fx of the precomputed floor; a %lld-id "
              "step's gradient at 1x within %.2f ms\n", ok ? "PASS" : "FAIL", kGuard,
              static_cast<long long>(kStepIds), kStepGradientMs);
  return ok ? 0 : 1;
}
