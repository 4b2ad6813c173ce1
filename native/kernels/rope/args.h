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

// rope_kv_append: a decoder layer's attention inputs in one pass over its q/k/v projections (the rows of
// q, k and v are [batch, seq] rows of heads * dim columns starting at column *_offset, last dim contiguous,
// usually column ranges of one merged GEMM output):
//   q_out [batch, heads, seq, dim] (contiguous)         = rope(q)
//   key_cache[:, :, position:position + seq] = rope(k), value_cache[:, :, position:position + seq] = v
// with the caches [batch, kv_heads, capacity, dim] contiguous. rope as in RopeArgs; everything in `dtype` but the
// caches, which may be bfloat16 beside float32 projections (rope's float32 result rounded once to them), or int8
// rows (s8_rows, [batch, kv_heads, capacity, dim + 4] bytes: rope's float32 result quantized per row).
struct RopeKvAppendArgs {
    DType dtype = DType::f32;        // of q, k, v and q_out
    DType cache_dtype = DType::f32;  // of the caches: dtype, bf16 beside f32, or s8_rows
    int64_t batch = 0, seq = 0, dim = 0, heads = 0, kv_heads = 0;
    const void* source[3] = {};      // q, k, v, each at its first used column
    int64_t source_strides[3][2] = {};  // per source: batch, seq (elements)
    const void* cos = nullptr;
    const void* sin = nullptr;
    DType table_dtype = DType::f32;  // of cos and sin: [table_batch, seq, dim] contiguous
    int64_t table_batch = 1;
    void* q_out = nullptr;
    void* key_cache = nullptr;
    void* value_cache = nullptr;
    int64_t capacity = 0, position = 0;
    int threads = 1;
};

}  // namespace ipxc
