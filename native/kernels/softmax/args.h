// The argument struct(s) of the softmax kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// softmax over the last dim of x * scale + mask.
struct SoftmaxArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t rows = 0, cols = 0;
    float scale = 1.0f;
    DType dtype = DType::f32;
    // Optional additive mask with a contiguous last dim of `cols` elements. Row r of x has
    // leading index (i0, ..., i_{k-1}) over lead_shape; its mask row starts at
    // sum(i_d * mask_strides[d]) elements (stride 0 broadcasts that dim).
    const void* mask = nullptr;
    DType mask_dtype = DType::f32;
    int lead_ndim = 0;
    int64_t lead_shape[kMaxMaskDims] = {};
    int64_t mask_strides[kMaxMaskDims] = {};
    int threads = 1;
};

}  // namespace ipxc
