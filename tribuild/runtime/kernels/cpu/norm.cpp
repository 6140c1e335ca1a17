// RMSNorm on the CPU: one call a row block instead of PyTorch's eight operations.
//
// Built into the same library as ternary.cpp (tribuild.runtime.kernels.cpu.build). A decode
// step of a BitNet LM normalizes four vectors a layer; at one token each is a few thousand
// floats, where the eight dispatched operations of torch.rms_norm cost more than the work.
// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, the mean of squares summed in double
// (PyTorch sums in float32 in its own order: the results agree within a few units in the
// last place).

#include <cmath>
#include <cstdint>
#include <algorithm>

extern "C" {

void tb_rms_norm(const float* x, int64_t m, int64_t k, const float* weight, float eps, float* out) {
  for (int64_t r = 0; r < m; ++r) {
    const float* row = x + r * k;
    float part[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    double total = 0.0;
    for (; i + 8 <= k; i += 8) {
      for (int j = 0; j < 8; ++j) part[j] += row[i + j] * row[i + j];  // eight lanes
      if ((i & 1023) == 1016) {  // every 1024: into double, before float32 lanes lose bits
        for (int j = 0; j < 8; ++j) total += part[j], part[j] = 0.0f;
      }
    }
    for (int j = 0; j < 8; ++j) total += part[j];
    for (; i < k; ++i) total += static_cast<double>(row[i]) * row[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(total / static_cast<double>(k) + eps));
    float* o = out + r * k;
    if (weight)
      for (int64_t j = 0; j < k; ++j) o[j] = row[j] * inv * weight[j];
    else
      for (int64_t j = 0; j < k; ++j) o[j] = row[j] * inv;
  }
}

}  // extern "C"
