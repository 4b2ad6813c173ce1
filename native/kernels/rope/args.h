// The argument struct(s) of the rope kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// rope: rotary position embedding, rotate-half form, over x [batch, heads, seq, dim] (last dim contiguous,
// the others any element strides: x is usually a permuted view of a projection's output):
//   out[.., i] = x[i] * cos[i] - x[i + dim/2] * sin[i]     for i <  dim/2
//   out[.., i] = x[i] * cos[i] + x[i - dim/2] * sin[i]     for i >= dim/2
// computed in float32, written once in out's dtype (x's). cos and sin: [cos_batch, seq, dim] contiguous
// (cos_batch 1 or batch), float32 or x's dtype. out: [batch, heads, seq, dim] contiguous.
struct RopeArgs {
    const void* x = nullptr;
    DType dtype = DType::f32;        // of x and out
    int64_t batch = 0, heads = 0, seq = 0, dim = 0;
    int64_t x_strides[3] = {};       // batch, head, seq (elements)
    const void* cos = nullptr;
    const void* sin = nullptr;
    DType table_dtype = DType::f32;  // of cos and sin
    int64_t table_batch = 1;
    void* out = nullptr;
    int threads = 1;
};

}  // namespace ipxc
