// Ternary weights converted at load: a float32 weight ternarized and packed in one pass.
//
// Built into the same library as ternary.cpp (tribuild.runtime.kernels.cpu.build); loading a
// checkpoint in the float layout is these passes over every weight, so they are native where
// the kernels are. The results are those of tribuild.runtime.packing.pack_ternary's torch
// path, bit for bit: code = clamp(round_half_even(w / g), -1, 1) with a float32 division, and
// the packed layout of tribuild.runtime.packing (uint8 [n][ceil(k / 4)], the code of k in bits
// 2 (k % 4) of byte k / 4; 0b00 = 0, 0b01 = +1, 0b10 = -1; padding 0b00).

#include <cmath>
#include <cstdint>
#include <algorithm>
#ifdef _OPENMP
#include <omp.h>
#endif

extern "C" {

// packed [n][ceil(k / 4)] of w [n][k] with the scale g[0] (``channel`` 0) or g[row].
void tb_ternary_pack(const float* w, int64_t n, int64_t k, const float* g, int64_t channel,
                     uint8_t* packed, int threads) {
  const int64_t cols = (k + 3) / 4;
  constexpr int64_t CHUNK = 256;  // codes made (vectorized) before they are packed
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const float* row = w + r * k;
    const float scale = g[channel ? r : 0];
    uint8_t* out = packed + r * cols;
    uint8_t codes[CHUNK];
    for (int64_t c0 = 0; c0 < k; c0 += CHUNK) {
      const int64_t len = std::min(CHUNK, k - c0);
      for (int64_t i = 0; i < len; ++i) {
        const float v = std::nearbyint(row[c0 + i] / scale);  // the default rounding: half to even
        codes[i] = static_cast<uint8_t>((v >= 1.0f ? 1 : 0) | (v <= -1.0f ? 2 : 0));
      }
      for (int64_t i = len; i < CHUNK; ++i) codes[i] = 0;  // the padding: 0b00
      for (int64_t b = 0; b < (len + 3) / 4; ++b)
        out[c0 / 4 + b] = static_cast<uint8_t>(codes[4 * b] | (codes[4 * b + 1] << 2) |
                                                (codes[4 * b + 2] << 4) | (codes[4 * b + 3] << 6));
    }
  }
}

}  // extern "C"
