// The argument struct(s) of the to_channels_last kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// to_channels_last: x [batch, channels, pixels] (NCHW, H * W flattened) written as y [batch,
// pixels, channels] (NHWC) and converted on the way: to float32 or bf16 (round to nearest even),
// or, with `quantized`, to int8/uint8 per tensor with quantize's arithmetic.
struct ChannelsLastArgs {
    const void* x = nullptr;  // f32 or bf16
    void* y = nullptr;        // out_dtype, or int8/uint8 when quantized
    int64_t batch = 0, channels = 0, pixels = 0;
    DType dtype = DType::f32;
    DType out_dtype = DType::f32;
    bool quantized = false, out_unsigned = false;
    float scale = 1.0f;
    int32_t zero_point = 0;
    // Optional: set to 1 when x holds a NaN or an infinity (found as each block is read; the model's own scan of
    // an input this kernel reads whole, runtime/model.py); the output is written all the same.
    int32_t* nonfinite = nullptr;
    int threads = 1;
};

}  // namespace ipxc
