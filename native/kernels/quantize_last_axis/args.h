// The argument struct(s) of the quantize_last_axis kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// Activation quantize with one multiplier per channel of the LAST axis (SmoothQuant smoothing
// folded in), x seen as [rows, cols], channel = column:
//   y = clamp(nearbyint(x * inv_scales[c]) + zero_point)   (product rounded to float first)
struct QuantizeLastAxisArgs {
    const void* x = nullptr;              // f32 or bf16
    void* y = nullptr;                    // int8 or uint8
    int64_t rows = 0, cols = 0;
    const float* inv_scales = nullptr;    // cols
    int32_t zero_point = 0;
    bool out_unsigned = false;
    DType dtype = DType::f32;
    int threads = 1;
};

}  // namespace ipxc
