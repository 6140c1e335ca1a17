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
// - *panel layout*: the codes of 4 channels (a *group*) side by side in pieces of 16: bytes
//   [groups][kp / 16][4 channels][16], kp = k rounded up to 16; the padding codes are 0 and
//   channels past n are rows of zeros. A decoding pass over a group reads one stream, each
//   64-byte line the next 16 weights of its 4 channels: row-major [n][k] made four streams
//   that restart every 4 rows, and the hardware prefetcher lost a third of the bandwidth.
// - *product*: out[r][c] = scale[c] * sum_k q[c][k] x[r][k]. Several rows: x float32 as it
//   is, float32 sums in eight lanes. One row (decoding), on AVX2: x as int16, xs = max|x| /
//   32767 a row, x16 = round_half_even(x / xs), a rounding 1/65534 of max|x| at most (the
//   weight's own is 1/254 of its row's): int8 x int16 pairs by vpmaddwd into int32 lanes,
//   half the instructions a weight of the float path, so one core keeps up with memory (a
//   row holding a NaN or an infinity takes the float path: int16 has no code for it).
//   A lane adds k / 8 products of at most 127 * 32767; flushed to float32 every FLUSH
//   weights (FLUSH / 8 * 127 * 32767 < 2^31), it never overflows.
// - *threads*: OpenMP, the count the caller passes (torch.get_num_threads()), over groups
//   handed out dynamically a few at a time (a descheduled thread holds back only its own).

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <limits>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

float abs_max(const float* x, int64_t k);  // ternary.cpp

namespace {

constexpr int64_t CHANNELS = 4;  // channels that share one pass over a row's activations
constexpr int64_t PIECE = 16;    // a channel's weights side by side in the panel layout
constexpr int64_t ROWS = 4;      // rows that share one pass over a channel group's weights
constexpr int64_t FLUSH = 2048;  // weights a decode lane sums in int32 before float32
constexpr int64_t PREFETCH = 1024;  // bytes of a group the decode loop asks for ahead

inline int64_t padded_k(int64_t k) { return (k + PIECE - 1) / PIECE * PIECE; }
inline int64_t groups_of(int64_t n) { return (n + CHANNELS - 1) / CHANNELS; }

// Where weight i of channel c lies in a group's panel (see *panel layout*).
inline int64_t at(int64_t c, int64_t i) { return (i / PIECE) * CHANNELS * PIECE + c * PIECE + i % PIECE; }

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

// dot[r][c] = sum_k q[c][k] x[r][k] for ``nr`` <= ROWS rows and ``nc`` <= CHANNELS channels of
// the group whose panel is ``q``.
void block(const float* x, int64_t ldx, int64_t nr, const int8_t* q, int64_t nc, int64_t k,
           float dot[ROWS][CHANNELS]) {
  int64_t i = 0;
#if defined(__AVX2__)
  __m256 acc[ROWS][CHANNELS];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < CHANNELS; ++c) acc[r][c] = _mm256_setzero_ps();
  for (; i + 8 <= k; i += 8) {  // 8 weights never straddle a piece of 16
    __m256 wv[CHANNELS];
    for (int c = 0; c < nc; ++c) wv[c] = widen(q + at(c, i));
    for (int r = 0; r < nr; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * ldx + i);
      for (int c = 0; c < nc; ++c) acc[r][c] = _mm256_fmadd_ps(wv[c], xv, acc[r][c]);
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
      for (int64_t j = i; j < k; ++j) tail += static_cast<float>(q[at(c, j)]) * x[r * ldx + j];
      dot[r][c] += tail;
    }
}

#if defined(__AVX2__)
// One row, int16 activations (see *product*): dot[c] = sum_k q[c][k] x16[k], as float32, for
// the group whose panel is ``q``; x16 holds kp values (the padding 0).
void decode_group(const int16_t* x16, const int8_t* q, int64_t kp, float dot[CHANNELS]) {
  __m256 total[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) total[c] = _mm256_setzero_ps();
  for (int64_t i = 0; i < kp;) {
    const int64_t stop = std::min(kp, i + FLUSH);
    __m256i acc[CHANNELS];
    for (int c = 0; c < CHANNELS; ++c) acc[c] = _mm256_setzero_si256();
    for (; i < stop; i += PIECE) {
      const int8_t* line = q + i * CHANNELS;  // 16 weights of each channel: one 64-byte line
      // a line of the stream 1 KiB ahead: the prefetcher alone left one core waiting on memory
      _mm_prefetch(reinterpret_cast<const char*>(line + PREFETCH), _MM_HINT_T0);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x16 + i));
      for (int c = 0; c < CHANNELS; ++c) {
        const __m256i wv = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(line + c * PIECE)));
        acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(wv, xv));
      }
    }
    for (int c = 0; c < CHANNELS; ++c) total[c] = _mm256_add_ps(total[c], _mm256_cvtepi32_ps(acc[c]));
  }
  for (int c = 0; c < CHANNELS; ++c) dot[c] = hsum(total[c]);
}

// Whether x [k] holds no NaN and no infinity (x - x: 0 for a finite x, else NaN), in vectors:
// a scalar chain of dependent adds would cost the decode call's quantization its speed.
bool finite(const float* x, int64_t k) {
  __m256 bad = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i), d = _mm256_sub_ps(v, v);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
  }
  bool ok = _mm256_movemask_ps(bad) == 0;
  for (; i < k; ++i) ok = ok && x[i] - x[i] == 0.0f;
  return ok;
}

// x16 [kp] and its scale (see *product*); the padding past k is 0. False (x16 unwritten)
// where x holds a NaN or an infinity, which no int16 code stands for (the cast of NaN is
// undefined: it made finite logits of a NaN hidden state), or where the scale is not a normal
// float (a row of zeros, or a subnormal largest value): the caller takes the float path.
bool quantize16(const float* x, int64_t k, int64_t kp, int16_t* x16, float* scale) {
  if (!finite(x, k)) return false;
  const float xs = *scale = abs_max(x, k) / 32767.0f;  // ternary.cpp's, one library
  // a subnormal xs has a few bits: x / xs could pass 32767 (an undefined cast) and the
  // rounding would be coarse; such a row (or a row of zeros) takes the float path
  if (!(xs >= std::numeric_limits<float>::min())) return false;
  for (int64_t j = 0; j < k; ++j) {
    const float v = std::nearbyint(x[j] / xs);
    x16[j] = static_cast<int16_t>(std::min(std::max(v, -32767.0f), 32767.0f));  // in range
  }
  for (int64_t j = k; j < kp; ++j) x16[j] = 0;
  return true;
}
#endif

}  // namespace

extern "C" {

// The bytes of an [n][k] weight's panel (see *panel layout*).
int64_t tb_i8_panel_bytes(int64_t n, int64_t k) { return groups_of(n) * CHANNELS * padded_k(k); }

// The panel q and scale [n] of a float32 weight w [n][k] (see *row quantization*).
void tb_i8_quantize(const float* w, int64_t n, int64_t k, int8_t* q, float* scale, int threads) {
  const int64_t kp = padded_k(k), group_bytes = CHANNELS * kp;
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static)
  for (int64_t c = 0; c < groups_of(n) * CHANNELS; ++c) {
    int8_t* panel = q + c / CHANNELS * group_bytes + c % CHANNELS * PIECE;
    const float* row = c < n ? w + c * k : nullptr;  // past n: a padding channel, codes 0
    const float s = (row ? abs_max(row, k) : 0.0f) / 127.0f;
    if (row) scale[c] = s;
    // a piece of 16 at a time, contiguous in the panel, so the loop vectorizes as a row's did
    for (int64_t base = 0; base < kp; base += PIECE) {
      int8_t* piece = panel + base * CHANNELS;
      const int64_t len = row ? std::min(PIECE, k - base) : 0;
      for (int64_t j = 0; j < len; ++j) {
        const float v = s > 0.0f ? std::nearbyint(row[base + j] / s) : 0.0f;  // half to even
        piece[j] = static_cast<int8_t>(std::min(std::max(v, -127.0f), 127.0f));
      }
      for (int64_t j = std::max<int64_t>(len, 0); j < PIECE; ++j) piece[j] = 0;
    }
  }
}

// out [m][n] = scale[c] * (x [m][k] . q [n][k]), q a panel (see *product*).
void tb_i8_linear(const float* x, int64_t m, int64_t k, const int8_t* q, const float* scale,
                  int64_t n, float* out, int threads) {
  const int64_t groups = groups_of(n), kp = padded_k(k), group_bytes = CHANNELS * kp;
  const int nt = (m * n * k < (int64_t(1) << 18)) ? 1 : std::max(1, threads);
  const int64_t chunk = std::max<int64_t>(1, groups / (8 * int64_t(nt)));  // 8 a thread
#if defined(__AVX2__)
  int16_t* x16 = m == 1 ? static_cast<int16_t*>(std::malloc(static_cast<size_t>(kp) * 2 + 32))
                        : nullptr;
  float xs = 0.0f;
  if (x16 && quantize16(x, k, kp, x16, &xs)) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * CHANNELS, nc = std::min(CHANNELS, n - c0);
      float dot[CHANNELS];
      decode_group(x16, q + g * group_bytes, kp, dot);
      for (int64_t c = 0; c < nc; ++c) out[c0 + c] = dot[c] * xs * scale[c0 + c];
    }
    std::free(x16);
    return;
  }
  std::free(x16);  // not finite (or no memory): the float path, as several rows take
#endif
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t c0 = g * CHANNELS, nc = std::min(CHANNELS, n - c0);
    float dot[ROWS][CHANNELS];
    for (int64_t r0 = 0; r0 < m; r0 += ROWS) {
      const int64_t nr = std::min(ROWS, m - r0);
      block(x + r0 * k, k, nr, q + g * group_bytes, nc, k, dot);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t c = 0; c < nc; ++c) out[(r0 + r) * n + c0 + c] = dot[r][c] * scale[c0 + c];
    }
  }
}

}  // extern "C"
