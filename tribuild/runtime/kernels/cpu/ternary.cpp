// Ternary linear layers on the CPU over 2-bit codes, BitLinear's int8 quantization fused.
//
// Compiled once per instruction set by tribuild.runtime.kernels.cpu.build (the same source:
// the ISA is the compiler's flags, seen here as __AVX2__, __AVX512BW__, __AVX512VNNI__), loaded
// with ctypes; every entry point is extern "C" and takes plain pointers.
//
// Terms:
// - *codes*: c in {-1, 0, +1}; stored offset, c' = c + 1 in {0, 1, 2} (2 bits), so that
//   maddubs/dpbusd (unsigned x signed bytes) multiply them with the int8 activations q:
//   sum c q = sum c' q - sum q, and sum q is one number per row.
// - *layout* (tb_repack): channels in groups of GROUP = 4, K in blocks of BLOCK = 128; the
//   weight is bytes [groups][blocks][4 channels][32]; byte j of a channel's 32 bytes holds, in
//   bits 2t..2t+1, the code of k = 128 b + 32 t + j. One 32-byte load, shifted by 2t and
//   masked, gives the 32 codes that meet 32 consecutive activations. K is padded to a
//   multiple of 128 and N to a multiple of 4 with c' = 1 (zero weights); the activations'
//   padding is q = 0.
// - *quantization* (BitLinear, tribuild.runtime.ternarize): per row, amax = max(max|x|, eps),
//   s = 127 / amax (a float32 division), q = clamp(round_half_even(x s), -128, 127). The
//   product of a row is (float)(sum c q) / s, then the epilogue, in float32, as
//   tribuild.runtime.epilogue does it: act(y * scale + bias + residual), one rounding a step
//   (the build passes -ffp-contract=off: no fused multiply-adds the reference does not have).
// - *int16 run*: maddubs sums two products into an int16 lane, at most 2 * 2 * 128 = 512 in
//   magnitude; RUN = 8 blocks (4 maddubs each) sum to at most 16384 before they are widened
//   to int32 (madd with ones), so no lane saturates or wraps.
// - *threads*: OpenMP with the count the caller passes (torch.get_num_threads()); loaded into
//   a process that imported torch, libgomp.so.1 is torch's own, so the pool is PyTorch's.
//   Channel groups go to the threads in *items* taken dynamically (see linear()); each output
//   is one thread's, so the results do not depend on the split.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#if defined(__AVX2__) || defined(__AVX512BW__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr int64_t GROUP = 4;
constexpr int64_t BLOCK = 128;
constexpr int64_t BLOCK_BYTES = BLOCK / 4;  // one channel's bytes of one block
constexpr int64_t RUN = 8;                  // blocks summed in int16 before widening
constexpr int64_t ROW_CHUNK = 32;           // rows whose activations a group's codes meet at once
constexpr int64_t PREFETCH = 2048;          // bytes of weights the decode loop asks for ahead
constexpr int64_t ITEM_GROUPS = 16;         // groups a thread takes at a time (several rows)

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t blocks_of(int64_t k) { return cdiv(k, BLOCK); }
inline int64_t groups_of(int64_t n) { return cdiv(n, GROUP); }

enum Act { NONE = 0, RELU = 1, RELU6 = 2, SILU = 3, GELU = 4, SIGMOID = 5 };

struct Epilogue {
  const float* scale;
  int64_t channel_scale;
  const float* bias;
  const float* residual;
  int act;
  float* out;
  int32_t* raw;  // tests: the integer sums instead of the epilogue
  const float* s;
};

inline float activate(float y, int act) {
  switch (act) {
    case RELU: return y > 0.0f ? y : 0.0f;
    case RELU6: return std::min(std::max(y, 0.0f), 6.0f);
    case SILU: return y / (1.0f + std::exp(-y));
    case GELU: return 0.5f * y * (1.0f + std::erf(y * 0.70710678118654752f));
    case SIGMOID: return 1.0f / (1.0f + std::exp(-y));
    default: return y;
  }
}

// Output (row, channel) from its product ``acc`` (float32).
inline void finish_value(const Epilogue& e, int64_t row, int64_t ch, int64_t n, float y) {
  y = y * e.scale[e.channel_scale ? ch : 0];
  if (e.bias) y = y + e.bias[ch];
  if (e.residual) y = y + e.residual[row * n + ch];
  e.out[row * n + ch] = activate(y, e.act);
}

// Output (row, channel) from its integer sum (sum c q).
inline void finish(const Epilogue& e, int64_t row, int64_t ch, int64_t n, int32_t dot) {
  if (e.raw) {
    e.raw[row * n + ch] = dot;
    return;
  }
  finish_value(e, row, ch, n, static_cast<float>(dot) / e.s[row]);
}

// ---- activation quantization (shared by every ISA: it reads each x once) ----

}  // namespace

// max(max |x[i]|, 0) as std::max(a, |x|) folds it (a NaN never taken): exact in any order.
// Shared with int8.cpp (the same library).
float abs_max(const float* x, int64_t k) {
  float amax = 0.0f;
  int64_t i = 0;
#if defined(__AVX2__) || defined(__AVX512BW__)
  // the compiler leaves the scalar fold as a chain of dependent maxss (it may not reorder a
  // float max): a decode step's quantization ran single-threaded at a few cycles a value
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= k; i += 8)  // max(|x|, acc): maxps gives its second operand where one is NaN
    acc = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), acc);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  for (float lane : lanes) amax = std::max(amax, lane);
#endif
  for (; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

namespace {

void quantize_row(const float* x, int64_t k, int64_t kp, float eps, int8_t* q, float* s,
                  int32_t* qsum) {
  const float amax = std::max(abs_max(x, k), eps);
  const float scale = 127.0f / amax;
  int32_t total = 0;
  for (int64_t i = 0; i < k; ++i) {
    float v = std::nearbyint(x[i] * scale);  // the default rounding mode: half to even
    v = std::min(std::max(v, -128.0f), 127.0f);
    q[i] = static_cast<int8_t>(v);
    total += q[i];
  }
  std::memset(q + k, 0, static_cast<size_t>(kp - k));
  *s = scale;
  *qsum = total;
}

#if defined(__AVX2__) || defined(__AVX512BW__)
inline int32_t hsum8(__m256i v) {
  __m128i a = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4e));
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0xb1));
  return _mm_cvtsi128_si32(a);
}
#endif

// ---- one row, one group of 4 channels, codes unpacked in registers (decode) ----

void gemv_group(const uint8_t* w, const int8_t* q, int64_t nblocks, int32_t dot[GROUP]) {
#if defined(__AVX512BW__)
  const __m512i mask = _mm512_set1_epi8(3);
  __m512i acc01 = _mm512_setzero_si512(), acc23 = _mm512_setzero_si512();
#if !defined(__AVX512VNNI__)
  const __m512i ones = _mm512_set1_epi16(1);
#endif
  for (int64_t b0 = 0; b0 < nblocks; b0 += RUN) {
    const int64_t b1 = std::min(nblocks, b0 + RUN);
#if !defined(__AVX512VNNI__)
    __m512i run01 = _mm512_setzero_si512(), run23 = _mm512_setzero_si512();
#endif
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* wb = w + b * GROUP * BLOCK_BYTES;
      const __m512i w01 = _mm512_loadu_si512(wb);
      const __m512i w23 = _mm512_loadu_si512(wb + 64);
      for (int t = 0; t < 4; ++t) {
        const __m512i x = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * BLOCK + 32 * t)));
        const __m512i c01 = _mm512_and_si512(_mm512_srli_epi16(w01, 2 * t), mask);
        const __m512i c23 = _mm512_and_si512(_mm512_srli_epi16(w23, 2 * t), mask);
#if defined(__AVX512VNNI__)
        acc01 = _mm512_dpbusd_epi32(acc01, c01, x);
        acc23 = _mm512_dpbusd_epi32(acc23, c23, x);
#else
        run01 = _mm512_add_epi16(run01, _mm512_maddubs_epi16(c01, x));
        run23 = _mm512_add_epi16(run23, _mm512_maddubs_epi16(c23, x));
#endif
      }
    }
#if !defined(__AVX512VNNI__)
    acc01 = _mm512_add_epi32(acc01, _mm512_madd_epi16(run01, ones));
    acc23 = _mm512_add_epi32(acc23, _mm512_madd_epi16(run23, ones));
#endif
  }
  dot[0] = hsum8(_mm512_castsi512_si256(acc01));
  dot[1] = hsum8(_mm512_extracti64x4_epi64(acc01, 1));
  dot[2] = hsum8(_mm512_castsi512_si256(acc23));
  dot[3] = hsum8(_mm512_extracti64x4_epi64(acc23, 1));
#elif defined(__AVX2__)
  const __m256i mask = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[GROUP];
  for (int c = 0; c < GROUP; ++c) acc[c] = _mm256_setzero_si256();
  for (int64_t b0 = 0; b0 < nblocks; b0 += RUN) {
    const int64_t b1 = std::min(nblocks, b0 + RUN);
    __m256i run[GROUP];
    for (int c = 0; c < GROUP; ++c) run[c] = _mm256_setzero_si256();
    for (int64_t b = b0; b < b1; ++b) {
      const int8_t* qb = q + b * BLOCK;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 32));
      const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 64));
      const __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 96));
      const uint8_t* wb = w + b * GROUP * BLOCK_BYTES;
      // the weights 16 blocks ahead (2 KiB: the best of 1-4 KiB tried on 2 threads here),
      // kept out of the caches they would evict: without it one thread waits on memory
      // between blocks; a prefetch past the end faults nothing
      _mm_prefetch(reinterpret_cast<const char*>(wb + PREFETCH), _MM_HINT_NTA);
      _mm_prefetch(reinterpret_cast<const char*>(wb + PREFETCH + 64), _MM_HINT_NTA);
      for (int c = 0; c < GROUP; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + c * 32));
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(v, mask), x0);
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2), mask), x1);
        const __m256i p2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask), x2);
        const __m256i p3 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 6), mask), x3);
        run[c] = _mm256_add_epi16(run[c], _mm256_add_epi16(_mm256_add_epi16(p0, p1),
                                                           _mm256_add_epi16(p2, p3)));
      }
    }
    for (int c = 0; c < GROUP; ++c) acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(run[c], ones));
  }
  for (int c = 0; c < GROUP; ++c) dot[c] = hsum8(acc[c]);
#else
  for (int c = 0; c < GROUP; ++c) dot[c] = 0;
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* wb = w + b * GROUP * BLOCK_BYTES;
    const int8_t* qb = q + b * BLOCK;
    for (int c = 0; c < GROUP; ++c) {
      int32_t sum = 0;
      for (int j = 0; j < BLOCK_BYTES; ++j) {
        const int v = wb[c * BLOCK_BYTES + j];
        sum += (v & 3) * qb[j] + ((v >> 2) & 3) * qb[32 + j] + ((v >> 4) & 3) * qb[64 + j] +
               ((v >> 6) & 3) * qb[96 + j];
      }
      dot[c] += sum;
    }
  }
#endif
}

// ---- several rows: a group's codes unpacked once to bytes, then MR rows at a time ----
// ``codes`` is [blocks][4 slices t][4 channels][32] bytes of c', the slice t of every channel
// side by side; ``dot`` is [MR][4].

void unpack_group(const uint8_t* w, int64_t nblocks, uint8_t* codes) {
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* wb = w + b * GROUP * BLOCK_BYTES;
    uint8_t* cb = codes + b * GROUP * BLOCK;
#if defined(__AVX2__)
    const __m256i mask = _mm256_set1_epi8(3);
    for (int c = 0; c < GROUP; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + c * 32));
      for (int t = 0; t < 4; ++t)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(cb + (t * GROUP + c) * 32),
                            _mm256_and_si256(_mm256_srli_epi16(v, 2 * t), mask));
    }
#else
    for (int c = 0; c < GROUP; ++c)
      for (int t = 0; t < 4; ++t)
        for (int j = 0; j < BLOCK_BYTES; ++j)
          cb[(t * GROUP + c) * 32 + j] = (wb[c * BLOCK_BYTES + j] >> (2 * t)) & 3;
#endif
  }
}

template <int MR>
void tile(const uint8_t* codes, const int8_t* q, int64_t kp, int64_t nblocks, int32_t dot[][GROUP]) {
#if defined(__AVX2__)
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[MR][GROUP];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < GROUP; ++c) acc[r][c] = _mm256_setzero_si256();
  for (int64_t b0 = 0; b0 < nblocks; b0 += RUN) {
    const int64_t b1 = std::min(nblocks, b0 + RUN);
    __m256i run[MR][GROUP];
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < GROUP; ++c) run[r][c] = _mm256_setzero_si256();
    for (int64_t s = b0 * 4; s < b1 * 4; ++s) {  // slices of 32 weights
      const uint8_t* cs = codes + s * GROUP * 32;
      __m256i cv[GROUP];
      for (int c = 0; c < GROUP; ++c)
        cv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cs + c * 32));
      for (int r = 0; r < MR; ++r) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + r * kp + s * 32));
        for (int c = 0; c < GROUP; ++c)
          run[r][c] = _mm256_add_epi16(run[r][c], _mm256_maddubs_epi16(cv[c], x));
      }
    }
    for (int r = 0; r < MR; ++r)
      for (int c = 0; c < GROUP; ++c)
        acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(run[r][c], ones));
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < GROUP; ++c) dot[r][c] = hsum8(acc[r][c]);
#else
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < GROUP; ++c) {
      int32_t sum = 0;
      for (int64_t s = 0; s < nblocks * 4; ++s) {
        const uint8_t* cs = codes + (s * GROUP + c) * 32;
        const int8_t* x = q + r * kp + s * 32;
        for (int j = 0; j < 32; ++j) sum += cs[j] * x[j];
      }
      dot[r][c] = sum;
    }
#endif
}

void emit(const Epilogue& e, int64_t row, int64_t g, int64_t n, const int32_t* dot,
          const int32_t* qsum) {
#if defined(__AVX2__)
  // A whole group of 4 outputs at once (a sixth of a 128-row GEMM's CPU time was the scalar
  // epilogue): the same IEEE operations in the same order as finish(), each exact per lane, so
  // the outputs are bit for bit the scalar ones; the activations with exp/erf stay scalar.
  if (!e.raw && (g + 1) * GROUP <= n && (e.act == NONE || e.act == RELU || e.act == RELU6)) {
    const int64_t ch = g * GROUP;
    const __m128i d = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dot)),
                                    _mm_set1_epi32(qsum[row]));
    __m128 y = _mm_div_ps(_mm_cvtepi32_ps(d), _mm_set1_ps(e.s[row]));
    y = _mm_mul_ps(y, e.channel_scale ? _mm_loadu_ps(e.scale + ch) : _mm_set1_ps(e.scale[0]));
    if (e.bias) y = _mm_add_ps(y, _mm_loadu_ps(e.bias + ch));
    if (e.residual) y = _mm_add_ps(y, _mm_loadu_ps(e.residual + row * n + ch));
    // max(a, b) is a > b ? a : b: max(y, 0) is activate's y > 0 ? y : 0 (NaN and -0 give 0),
    // and max(0, y), min(6, .) are std::max(y, 0), std::min(., 6) (NaN passes)
    if (e.act == RELU) y = _mm_max_ps(y, _mm_setzero_ps());
    if (e.act == RELU6) y = _mm_min_ps(_mm_set1_ps(6.0f), _mm_max_ps(_mm_setzero_ps(), y));
    _mm_storeu_ps(e.out + row * n + ch, y);
    return;
  }
#endif
  for (int64_t c = 0; c < GROUP; ++c) {
    const int64_t ch = g * GROUP + c;
    if (ch < n) finish(e, row, ch, n, dot[c] - qsum[row]);
  }
}

// The product of the quantized rows q [m][kp] with the channels of groups [g0, g1).
void run_groups(const uint8_t* w, const int8_t* q, const int32_t* qsum, int64_t m, int64_t kp,
                int64_t n, int64_t g0, int64_t g1, const Epilogue& e, uint8_t* codes) {
  const int64_t nblocks = kp / BLOCK;
  const int64_t group_bytes = nblocks * GROUP * BLOCK_BYTES;
  int32_t dot[2][GROUP];
  if (m == 1) {
    for (int64_t g = g0; g < g1; ++g) {
      gemv_group(w + g * group_bytes, q, nblocks, dot[0]);
      emit(e, 0, g, n, dot[0], qsum);
    }
    return;
  }
  for (int64_t r0 = 0; r0 < m; r0 += ROW_CHUNK) {
    const int64_t r1 = std::min(m, r0 + ROW_CHUNK);
    for (int64_t g = g0; g < g1; ++g) {
      unpack_group(w + g * group_bytes, nblocks, codes);
      int64_t r = r0;
      for (; r + 2 <= r1; r += 2) {
        tile<2>(codes, q + r * kp, kp, nblocks, dot);
        emit(e, r, g, n, dot[0], qsum);
        emit(e, r + 1, g, n, dot[1], qsum);
      }
      if (r < r1) {
        tile<1>(codes, q + r * kp, kp, nblocks, dot);
        emit(e, r, g, n, dot[0], qsum);
      }
    }
  }
}

// ---- float activations (no quantization): one row, one group, codes as floats ----
// The products sum in float32 in the kernel's own order (eight partial sums per channel).

void gemv_f32_group(const uint8_t* w, const float* x, int64_t nblocks, float dot[GROUP]) {
#if defined(__AVX2__)
  const __m256i mask = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc[GROUP], acc2[GROUP];
  for (int c = 0; c < GROUP; ++c) acc[c] = acc2[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* wb = w + b * GROUP * BLOCK_BYTES;
    for (int t = 0; t < 4; ++t) {
      const float* xs = x + b * BLOCK + 32 * t;
      const __m256 x0 = _mm256_loadu_ps(xs), x1 = _mm256_loadu_ps(xs + 8);
      const __m256 x2 = _mm256_loadu_ps(xs + 16), x3 = _mm256_loadu_ps(xs + 24);
      for (int c = 0; c < GROUP; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + c * 32));
        const __m256i codes = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(v, 2 * t), mask), one);
        const __m128i lo = _mm256_castsi256_si128(codes), hi = _mm256_extracti128_si256(codes, 1);
        // two chains a channel: four dependent FMAs would wait on each other's latency
        __m256 a = acc[c], d = acc2[c];
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), x0, a);
        d = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), x1, d);
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), x2, a);
        d = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), x3, d);
        acc[c] = a;
        acc2[c] = d;
      }
    }
  }
  for (int c = 0; c < GROUP; ++c) {
    const __m256 total = _mm256_add_ps(acc[c], acc2[c]);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps(total, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    dot[c] = _mm_cvtss_f32(h);
  }
#else
  for (int c = 0; c < GROUP; ++c) {
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t b = 0; b < nblocks; ++b) {
      const uint8_t* wb = w + (b * GROUP + c) * BLOCK_BYTES;
      for (int t = 0; t < 4; ++t)
        for (int j = 0; j < BLOCK_BYTES; ++j) {
          const int code = ((wb[j] >> (2 * t)) & 3) - 1;
          part[j % 8] += static_cast<float>(code) * x[b * BLOCK + 32 * t + j];
        }
    }
    dot[c] = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  }
#endif
}

struct Quantized {
  int8_t* q;
  float* s;
  int32_t* qsum;
};

void* aligned(size_t bytes) {
  return std::aligned_alloc(64, cdiv(static_cast<int64_t>(bytes), 64) * 64);
}

void linear(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, Epilogue e,
            float eps, int threads) {
  const int64_t kp = blocks_of(k) * BLOCK;
  const int64_t groups = groups_of(n);
  Quantized qz{static_cast<int8_t*>(aligned(m * kp)), static_cast<float*>(aligned(m * 4)),
               static_cast<int32_t*>(aligned(m * 4))};
  e.s = qz.s;
  // Small products are not worth waking the pool for.
  const int nt = (m * n * kp < (int64_t(1) << 18)) ? 1 : std::max(1, threads);
  // Work is handed out in *items* of groups, dynamically: on a shared machine a thread that
  // is descheduled keeps only its current item from the others (a static split made every
  // call wait for the slowest thread's whole half, spinning meanwhile). Decode: 8 items a
  // thread; several rows: ITEM_GROUPS groups (all rows), tens of items at prefill shapes.
  const int64_t item = m == 1 ? std::max<int64_t>(1, cdiv(groups, 8 * int64_t(nt))) : ITEM_GROUPS;
  const int64_t items = cdiv(groups, item);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    if (m > 1) {
#pragma omp for schedule(dynamic, 8)
      for (int64_t r = 0; r < m; ++r)
        quantize_row(x + r * k, k, kp, eps, qz.q + r * kp, qz.s + r, qz.qsum + r);
    } else {
#pragma omp single
      quantize_row(x, k, kp, eps, qz.q, qz.s, qz.qsum);
    }
    uint8_t* codes = m > 1 ? static_cast<uint8_t*>(aligned(kp * GROUP)) : nullptr;
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < items; ++i)
      run_groups(w, qz.q, qz.qsum, m, kp, n, i * item, std::min(groups, (i + 1) * item), e, codes);
    std::free(codes);
  }
  std::free(qz.q);
  std::free(qz.s);
  std::free(qz.qsum);
}

// Several rows, float activations: a group's codes unpacked once to floats, [kp][4 channels]
// (the 4 channels of weight k side by side... as 8-wide vectors: [kp / 8][4][8]), then two rows
// at a time meet them with FMAs (eight accumulators, no latency chain longer than kp / 8).
void unpack_group_f32(const uint8_t* w, int64_t nblocks, float* codes) {
  for (int64_t b = 0; b < nblocks; ++b)
    for (int c = 0; c < GROUP; ++c)
      for (int t = 0; t < 4; ++t)
        for (int j = 0; j < BLOCK_BYTES; ++j) {
          const int64_t kk = b * BLOCK + 32 * t + j;  // weight index
          const int code = ((w[(b * GROUP + c) * BLOCK_BYTES + j] >> (2 * t)) & 3) - 1;
          codes[((kk / 8) * GROUP + c) * 8 + kk % 8] = static_cast<float>(code);
        }
}

template <int MR>
void tile_f32(const float* codes, const float* x, int64_t kp, float dot[][GROUP]) {
#if defined(__AVX2__)
  __m256 acc[MR][GROUP];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < GROUP; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t v = 0; v < kp / 8; ++v) {
    const float* cv = codes + v * GROUP * 8;
    const __m256 c0 = _mm256_loadu_ps(cv), c1 = _mm256_loadu_ps(cv + 8);
    const __m256 c2 = _mm256_loadu_ps(cv + 16), c3 = _mm256_loadu_ps(cv + 24);
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * kp + v * 8);
      acc[r][0] = _mm256_fmadd_ps(c0, xv, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(c1, xv, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(c2, xv, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(c3, xv, acc[r][3]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < GROUP; ++c) {
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r][c]), _mm256_extractf128_ps(acc[r][c], 1));
      h = _mm_add_ps(h, _mm_movehl_ps(h, h));
      h = _mm_add_ss(h, _mm_movehdup_ps(h));
      dot[r][c] = _mm_cvtss_f32(h);
    }
#else
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < GROUP; ++c) {
      float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t v = 0; v < kp / 8; ++v)
        for (int j = 0; j < 8; ++j) part[j] += codes[(v * GROUP + c) * 8 + j] * x[r * kp + v * 8 + j];
      dot[r][c] = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    }
#endif
}

void emit_f32(const Epilogue& e, int64_t row, int64_t g, int64_t n, const float* dot) {
  for (int64_t c = 0; c < GROUP; ++c)
    if (g * GROUP + c < n) finish_value(e, row, g * GROUP + c, n, dot[c]);
}

void linear_f32(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n, const Epilogue& e,
                int threads) {
  const int64_t kp = blocks_of(k) * BLOCK, nblocks = kp / BLOCK;
  const int64_t groups = groups_of(n), group_bytes = nblocks * GROUP * BLOCK_BYTES;
  float* xp = static_cast<float*>(aligned(m * kp * 4));  // rows padded with zeros to kp
  for (int64_t r = 0; r < m; ++r) {
    std::memcpy(xp + r * kp, x + r * k, static_cast<size_t>(k) * 4);
    std::memset(xp + r * kp + k, 0, static_cast<size_t>(kp - k) * 4);
  }
  const int nt = (m * n * kp < (int64_t(1) << 17)) ? 1 : std::max(1, threads);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int tid = 0, count = 1;
#ifdef _OPENMP
    tid = omp_get_thread_num();
    count = omp_get_num_threads();
#endif
    const int64_t per = cdiv(groups, count);
    const int64_t g0 = std::min(groups, tid * per), g1 = std::min(groups, g0 + per);
    float dot[2][GROUP];
    if (m == 1) {
      for (int64_t g = g0; g < g1; ++g) {
        gemv_f32_group(w + g * group_bytes, xp, nblocks, dot[0]);
        emit_f32(e, 0, g, n, dot[0]);
      }
    } else if (g0 < g1) {
      float* codes = static_cast<float*>(aligned(kp * GROUP * 4));
      for (int64_t r0 = 0; r0 < m; r0 += ROW_CHUNK) {
        const int64_t r1 = std::min(m, r0 + ROW_CHUNK);
        for (int64_t g = g0; g < g1; ++g) {
          unpack_group_f32(w + g * group_bytes, nblocks, codes);
          int64_t r = r0;
          for (; r + 2 <= r1; r += 2) {
            tile_f32<2>(codes, xp + r * kp, kp, dot);
            emit_f32(e, r, g, n, dot[0]);
            emit_f32(e, r + 1, g, n, dot[1]);
          }
          if (r < r1) {
            tile_f32<1>(codes, xp + r * kp, kp, dot);
            emit_f32(e, r, g, n, dot[0]);
          }
        }
      }
      std::free(codes);
    }
  }
  std::free(xp);
}

}  // namespace

extern "C" {

// What this build is: the ISA it was compiled for (tribuild checks it at load).
const char* tb_isa() {
#if defined(__AVX512VNNI__)
  return "avx512vnni";
#elif defined(__AVX512BW__)
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "portable";
#endif
}

int64_t tb_layout_bytes(int64_t n, int64_t k) { return groups_of(n) * blocks_of(k) * GROUP * BLOCK_BYTES; }

// The kernel's layout (see the top) of a weight packed as tribuild.runtime.packing packs it:
// uint8 [n][ceil(k / 4)], code of k in bits 2 (k % 4) of byte k / 4, 0b00 = 0, 0b01 = +1,
// 0b10 = -1 (0b11 decodes as 0, as everywhere).
void tb_repack(const uint8_t* packed, int64_t n, int64_t k, uint8_t* out) {
  const int64_t row_bytes = cdiv(k, 4), nblocks = blocks_of(k), kp = nblocks * BLOCK;
  // c' of the four codes of each packed byte, as the four bytes of a word (0b11 decodes as 0)
  uint32_t offsets[256];
  for (int v = 0; v < 256; ++v) {
    uint32_t word = 0;
    for (int t = 0; t < 4; ++t) {
      const int code = (v >> (2 * t)) & 3;
      word |= static_cast<uint32_t>((code & 1) - (code >> 1) + 1) << (8 * t);
    }
    offsets[v] = word;
  }
  // one channel at a time: its codes as bytes c' (padding c' = 1), then the layout's bytes
#pragma omp parallel
  {
    uint8_t* row = static_cast<uint8_t*>(aligned(kp + 4));
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < groups_of(n) * GROUP; ++ch) {
      const int64_t g = ch / GROUP, c = ch % GROUP;
      std::memset(row, 1, static_cast<size_t>(kp + 4));
      if (ch < n) {
        const uint8_t* src = packed + ch * row_bytes;
        for (int64_t i = 0; i < row_bytes; ++i) std::memcpy(row + 4 * i, &offsets[src[i]], 4);
        std::memset(row + k, 1, static_cast<size_t>(kp + 4 - k));  // the last byte's padding
      }
      for (int64_t b = 0; b < nblocks; ++b) {
        const uint8_t* r = row + b * BLOCK;
        uint8_t* dst = out + ((g * nblocks + b) * GROUP + c) * BLOCK_BYTES;
        for (int64_t j = 0; j < BLOCK_BYTES; ++j)
          dst[j] = static_cast<uint8_t>(r[j] | (r[32 + j] << 2) | (r[64 + j] << 4) | (r[96 + j] << 6));
      }
    }
    std::free(row);
  }
}

// out [m][n] = act(scale * (quantize(x) . codes) + bias + residual) for x [m][k] float32.
// ``scale`` has 1 or n values (``channel_scale``); ``bias``, ``residual`` may be null;
// ``act`` is an Act.
void tb_linear(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n,
               const float* scale, int64_t channel_scale, const float* bias, const float* residual,
               int act, float* out, float eps, int threads) {
  Epilogue e{scale, channel_scale, bias, residual, act, out, nullptr, nullptr};
  linear(x, m, k, w, n, e, eps, threads);
}

// out [m][n] = act(scale * (x . codes) + bias + residual), x float32 as it is (no
// quantization), summed in float32.
void tb_linear_f32(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n,
                   const float* scale, int64_t channel_scale, const float* bias,
                   const float* residual, int act, float* out, int threads) {
  Epilogue e{scale, channel_scale, bias, residual, act, out, nullptr, nullptr};
  linear_f32(x, m, k, w, n, e, threads);
}

// The integer sums sum_k c q (raw [m][n]) and the row scales s [m], for tests.
void tb_linear_raw(const float* x, int64_t m, int64_t k, const uint8_t* w, int64_t n,
                   int32_t* raw, float eps, int threads) {
  static const float one = 1.0f;
  Epilogue e{&one, 0, nullptr, nullptr, NONE, nullptr, raw, nullptr};
  linear(x, m, k, w, n, e, eps, threads);
}

// The quantization alone: q [m][k] int8 and s [m], for tests.
void tb_quantize(const float* x, int64_t m, int64_t k, int8_t* q, float* s, float eps) {
  const int64_t kp = blocks_of(k) * BLOCK;
  int8_t* row = static_cast<int8_t*>(aligned(kp));
  for (int64_t r = 0; r < m; ++r) {
    int32_t total;
    quantize_row(x + r * k, k, kp, eps, row, s + r, &total);
    std::memcpy(q + r * k, row, static_cast<size_t>(k));
  }
  std::free(row);
}

}  // extern "C"
