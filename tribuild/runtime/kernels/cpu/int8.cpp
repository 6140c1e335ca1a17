// Float layers held in 8 bits on the CPU: a language model's output head and token embedding.
//
// Built into the same library as ternary.cpp (tribuild.runtime.kernels.cpu.build compiles both
// for one ISA); every entry point is extern "C" and takes plain pointers.
//
// Terms:
// - *row quantization*: a float32 weight [n][k] as int8 codes and one float32 scale a row,
//   scale = max|w_row| / 127, q = round_half_even(w / scale) (a row of zeros: scale 0, q 0).
//   Decoding is memory-bound: 1 byte a weight reads a quarter of float32's bytes (the head of a
//   32000-token vocabulary is most of a small model's bytes).
// - *product*: out[r][c] = scale[c] * sum_k q[c][k] x[r][k]. Several rows: x float32 as it
//   is, float32 sums in eight lanes. One row (decoding), on AVX2: x as int16, xs = max|x| /
//   32767 a row, x16 = round_half_even(x / xs), a rounding 1/65534 of max|x| at most (the
//   weight's own is 1/254 of its row's): int8 x int16 pairs by vpmaddwd into int32 lanes,
//   half the instructions a weight of the float path, so one core keeps up with memory.
//   A lane adds k / 8 products of at most 127 * 32767; flushed to float32 every FLUSH
//   weights (FLUSH / 8 * 127 * 32767 < 2^31), it never overflows.
// - *threads*: OpenMP, the count the caller passes (torch.get_num_threads()), over channels.

#include <cmath>
#include <cstdint>
#include <algorithm>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr int64_t CHANNELS = 4;  // channels that share one pass over a row's activations
constexpr int64_t ROWS = 4;      // rows that share one pass over a channel group's weights
constexpr int64_t FLUSH = 2048;  // weights a decode lane sums in int32 before float32

#if defined(__AVX2__)
inline float hsum(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Eight int8 weights at ``w`` as float32 (vpmovsxbd from memory, then a conversion).
inline __m256 widen(const int8_t* w) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
}
#endif

// dot[r][c] = sum_k q[c][k] x[r][k] for ``nr`` <= ROWS rows and ``nc`` <= CHANNELS channels.
void block(const float* x, int64_t ldx, int64_t nr, const int8_t* q, int64_t nc, int64_t k,
           float dot[ROWS][CHANNELS]) {
  int64_t i = 0;
#if defined(__AVX2__)
  __m256 acc[ROWS][CHANNELS];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < CHANNELS; ++c) acc[r][c] = _mm256_setzero_ps();
  if (nr == 1 && nc == CHANNELS) {  // decode: the weights' bytes are the whole cost
    for (; i + 8 <= k; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
      for (int c = 0; c < CHANNELS; ++c)
        acc[0][c] = _mm256_fmadd_ps(widen(q + c * k + i), xv, acc[0][c]);
    }
  } else {
    for (; i + 8 <= k; i += 8) {
      __m256 wv[CHANNELS];
      for (int c = 0; c < nc; ++c) wv[c] = widen(q + c * k + i);
      for (int r = 0; r < nr; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * ldx + i);
        for (int c = 0; c < nc; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
      }
    }
  }
  for (int r = 0; r < nr; ++r)
    for (int c = 0; c < nc; ++c) dot[r][c] = hsum(acc[r][c]);
#else
  for (int r = 0; r < nr; ++r)
    for (int c = 0; c < nc; ++c) dot[r][c] = 0.0f;
#endif
  for (int r = 0; r < nr; ++r)  // the tail of k past the last full vector (all of it, portable)
    for (int c = 0; c < nc; ++c) {
      float tail = 0.0f;
      for (int64_t j = i; j < k; ++j) tail += static_cast<float>(q[c * k + j]) * x[r * ldx + j];
      dot[r][c] += tail;
    }
}

#if defined(__AVX2__)
// One row, int16 activations (see *product*): dot[c] = sum_k q[c][k] x16[k], as float32.
void decode_block(const int16_t* x16, const int8_t* q, int64_t k, float dot[CHANNELS]) {
  __m256 total[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) total[c] = _mm256_setzero_ps();
  const int64_t whole = k / 16 * 16;  // weights in full vectors; the rest is the tail
  int64_t i = 0;
  while (i < whole) {
    const int64_t stop = std::min(whole, i + FLUSH);
    __m256i acc[CHANNELS];
    for (int c = 0; c < CHANNELS; ++c) acc[c] = _mm256_setzero_si256();
    for (; i < stop; i += 16) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x16 + i));
      for (int c = 0; c < CHANNELS; ++c) {
        const __m256i wv = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c * k + i)));
        acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(wv, xv));
      }
    }
    for (int c = 0; c < CHANNELS; ++c) total[c] = _mm256_add_ps(total[c], _mm256_cvtepi32_ps(acc[c]));
  }
  for (int c = 0; c < CHANNELS; ++c) {
    int64_t tail = 0;
    for (int64_t j = i; j < k; ++j) tail += static_cast<int64_t>(q[c * k + j]) * x16[j];
    dot[c] = hsum(total[c]) + static_cast<float>(tail);
  }
}

// x16 [kp] and its scale (see *product*); kp >= k, the padding zero.
float quantize16(const float* x, int64_t k, int16_t* x16) {
  float amax = 0.0f;
  for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float xs = amax / 32767.0f;
  for (int64_t j = 0; j < k; ++j)
    x16[j] = static_cast<int16_t>(xs > 0.0f ? std::nearbyint(x[j] / xs) : 0.0f);
  return xs;
}
#endif

}  // namespace

extern "C" {

// q [n][k] int8 and scale [n] of a float32 weight w [n][k] (see *row quantization*).
void tb_i8_quantize(const float* w, int64_t n, int64_t k, int8_t* q, float* scale, int threads) {
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static)
  for (int64_t c = 0; c < n; ++c) {
    const float* row = w + c * k;
    float amax = 0.0f;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float s = amax / 127.0f;
    scale[c] = s;
    for (int64_t j = 0; j < k; ++j) {
      const float v = s > 0.0f ? std::nearbyint(row[j] / s) : 0.0f;  // half to even
      q[c * k + j] = static_cast<int8_t>(std::min(std::max(v, -127.0f), 127.0f));
    }
  }
}

// out [m][n] = scale[c] * (x [m][k] . q [n][k]) (see *product*).
void tb_i8_linear(const float* x, int64_t m, int64_t k, const int8_t* q, const float* scale,
                  int64_t n, float* out, int threads) {
  const int64_t groups = (n + CHANNELS - 1) / CHANNELS;
  const int nt = (m * n * k < (int64_t(1) << 18)) ? 1 : std::max(1, threads);
#if defined(__AVX2__)
  if (m == 1) {
    int16_t* x16 = static_cast<int16_t*>(std::malloc(static_cast<size_t>(k) * 2 + 32));
    const float xs = quantize16(x, k, x16);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * CHANNELS, nc = std::min(CHANNELS, n - c0);
      float dot[ROWS][CHANNELS];
      if (nc == CHANNELS) {
        decode_block(x16, q + c0 * k, k, dot[0]);
        for (int64_t c = 0; c < nc; ++c) out[c0 + c] = dot[0][c] * xs * scale[c0 + c];
      } else {  // the last group's few channels: the float path
        block(x, k, 1, q + c0 * k, nc, k, dot);
        for (int64_t c = 0; c < nc; ++c) out[c0 + c] = dot[0][c] * scale[c0 + c];
      }
    }
    std::free(x16);
    return;
  }
#endif
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t c0 = g * CHANNELS, nc = std::min(CHANNELS, n - c0);
    float dot[ROWS][CHANNELS];
    for (int64_t r0 = 0; r0 < m; r0 += ROWS) {
      const int64_t nr = std::min(ROWS, m - r0);
      block(x + r0 * k, k, nr, q + c0 * k, nc, k, dot);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t c = 0; c < nc; ++c) out[(r0 + r) * n + c0 + c] = dot[r][c] * scale[c0 + c];
    }
  }
}

}  // extern "C"
