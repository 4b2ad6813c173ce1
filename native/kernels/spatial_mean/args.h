// The argument struct(s) of the spatial_mean kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// spatial_mean: the mean over H and W of x [N, C, H, W] (global average pooling) into y [N, C],
// summed in fp32. x is NCHW-contiguous, or with `channels_last` its NHWC view [N, H, W, C].
struct SpatialMeanArgs {
    const void* x = nullptr;  // f32 or bf16
    void* y = nullptr;        // x's dtype
    int64_t batch = 0, channels = 0, pixels = 0;
    bool channels_last = false;
    DType dtype = DType::f32;
    int threads = 1;
};

}  // namespace ipxc
