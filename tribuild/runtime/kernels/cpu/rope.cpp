// Rotary position embeddings on the CPU: one call instead of PyTorch's six operations.
//
// Built into the same library as ternary.cpp (tribuild.runtime.kernels.cpu.build). A decode
// step of a BitNet LM rotates the queries and the keys of every layer; at one token each is a
// few thousand floats, where the dispatch of decoding.rope's `x * cos + cat(-x2, x1) * sin`
// (two slices, a negation, a concatenation, two products and a sum) costs more than the work.
// The same float operations in the same order, each rounded to float32 (the build passes
// -ffp-contract=off: no fused multiply-add), so the result is the expression's bit for bit:
//   out[j] = x[j] * cos[j] + r[j] * sin[j],  r = (-x[h..d), x[0..h)),  h = d / 2.

#include <cstdint>

extern "C" {

// x: [n, heads, t, d] with element strides (sn, sh, st) and 1 along d; out likewise with
// (on, oh, ot); cos, sin: the t rows of the step's positions, [t, d] contiguous; d even.
void tb_rope(const float* __restrict__ x, int64_t n, int64_t heads, int64_t t, int64_t d,
             int64_t sn, int64_t sh, int64_t st, const float* __restrict__ cos,
             const float* __restrict__ sin, float* __restrict__ out, int64_t on, int64_t oh,
             int64_t ot) {
  const int64_t h = d / 2;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < heads; ++b)
      for (int64_t p = 0; p < t; ++p) {
        const float* row = x + a * sn + b * sh + p * st;
        const float* c = cos + p * d;
        const float* s = sin + p * d;
        float* o = out + a * on + b * oh + p * ot;
        for (int64_t j = 0; j < h; ++j) o[j] = row[j] * c[j] + (-row[j + h]) * s[j];
        for (int64_t j = h; j < d; ++j) o[j] = row[j] * c[j] + row[j - h] * s[j];
      }
}

}  // extern "C"
