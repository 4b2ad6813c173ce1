// The argument struct(s) of the norm kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// layer_norm and rms_norm over the last `cols` elements of each row:
//   v = x (+ residual); y = norm(v) * gamma (+ beta).
struct NormArgs {
    const void* x = nullptr;
    const void* residual = nullptr;  // optional, same dtype and shape as x
    void* y = nullptr;
    void* sum = nullptr;             // optional: receives x + residual (rounded to dtype)
    const float* gamma = nullptr;    // optional, cols floats
    const float* beta = nullptr;     // optional, cols floats (layer_norm only)
    int64_t rows = 0, cols = 0;
    float eps = 1e-5f;
    DType dtype = DType::f32;
    int threads = 1;
    // layer_norm only, optional: y quantized as well, of y's values in dtype, int8 or uint8. As
    // the quantize kernel would: clamp(nearbyint(fmaf(y, 1 / q_scale, q_zero_point))); with
    // q_multipliers (cols floats, SmoothQuant) as quantize_last_axis would:
    // clamp(nearbyint(y * q_multipliers[c]) + q_zero_point).
    void* q = nullptr;
    bool q_unsigned = true;
    float q_scale = 1.0f;
    int32_t q_zero_point = 0;
    const float* q_multipliers = nullptr;
};

}  // namespace ipxc
