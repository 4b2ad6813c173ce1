// The argument struct(s) of the dequantize kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

struct DequantizeArgs {  // y = (q - zero_point) * scale
    const void* q = nullptr;         // int8 or uint8
    void* y = nullptr;               // f32 or bf16
    int64_t rows = 0, cols = 0;
    const float* scales = nullptr;
    const int32_t* zero_points = nullptr;
    bool per_channel = false;
    bool in_unsigned = false;
    DType dtype = DType::f32;
    int threads = 1;
};

}  // namespace ipxc
