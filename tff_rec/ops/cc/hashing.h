// Where element (row, col) of a virtual n x dim table lives in a flat memory
// of m slots, and its sign. Shared by the CPU kernel, the CUDA kernel and the
// standalone CUDA harness; tff_rec/ops/hashing.py mirrors it bit for bit (the
// pure-TF composite and numpy reference).
//
// Keys: element mode hashes key = row * dim + col; chunk mode (ROBE-Z) hashes
// key = row * (dim / Z) + col / Z and adds col % Z to the slot. Slot and sign
// come from multiply-add hashing of the 64-bit key with two (a, b) pairs
// drawn from the seed by splitmix64, each followed by splitmix64's finaliser
// (mix): without it consecutive keys collide in fixed translated pairs and
// colliding entries' signs are correlated.
//   h(key) = mix(a_h * key + b_h) >> 32         (32 bits, independent of m)
//   g(key) = top bit of mix(a_g * key + b_g) ? -1 : +1
//   slot   = (h(key) [+ col % Z]) mod m
// Since h does not depend on m, slot mod m_i == (slot mod m) mod m_i for any
// m_i dividing m: tables of sizes m, m/2, m/4, ... are nested subspaces.
#ifndef TFF_REC_OPS_CC_HASHING_H_
#define TFF_REC_OPS_CC_HASHING_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TFF_REC_HOST_DEVICE __host__ __device__
#else
#define TFF_REC_HOST_DEVICE
#endif

namespace tff_rec {

struct HashParams {
  uint64_t a_h, b_h, a_g, b_g;
};

TFF_REC_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline uint64_t SplitMix64(uint64_t* state) { return Mix64(*state += 0x9E3779B97F4A7C15ULL); }

inline HashParams ParamsFromSeed(int64_t seed) {
  uint64_t state = static_cast<uint64_t>(seed);
  HashParams p;
  p.a_h = SplitMix64(&state) | 1ULL;  // odd multipliers
  p.b_h = SplitMix64(&state);
  p.a_g = SplitMix64(&state) | 1ULL;
  p.b_g = SplitMix64(&state);
  return p;
}

// Element (row, col) -> (slot in [0, m), sign in {-1, +1}). chunk == 0 means
// element mode; otherwise chunk is Z (dividing dim).
TFF_REC_HOST_DEVICE inline void Locate(const HashParams& p, uint64_t row, int64_t col,
                                       int64_t dim, int64_t chunk, uint64_t m,
                                       uint64_t* slot, float* sign) {
  uint64_t key, offset = 0;
  if (chunk == 0) {
    key = row * static_cast<uint64_t>(dim) + static_cast<uint64_t>(col);
  } else {
    key = row * static_cast<uint64_t>(dim / chunk) + static_cast<uint64_t>(col / chunk);
    offset = static_cast<uint64_t>(col % chunk);
  }
  const uint64_t h = Mix64(p.a_h * key + p.b_h) >> 32;
  *slot = (h + offset) % m;
  *sign = (Mix64(p.a_g * key + p.b_g) >> 63) ? -1.0f : 1.0f;
}

}  // namespace tff_rec

#endif  // TFF_REC_OPS_CC_HASHING_H_
