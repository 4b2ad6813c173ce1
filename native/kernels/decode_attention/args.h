// The argument struct(s) of the decode_attention kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// decode_attention: softmax(q k^T * scale + mask) v for a few query rows against a long cache, with
// grouped-query heads: query head h reads key/value head h / (heads / kv_heads). q [batch, heads, q_len,
// head_dim], k and v [batch, kv_heads, kv_len, head_dim], out [batch, heads, q_len, head_dim]; every
// last dim contiguous, the other dims any element strides (the cache is a view of a buffer with spare
// positions). float32 or bfloat16: q and out alike, k and v alike, either q's dtype or bfloat16 beside float32 q (a
// cache stored narrower than the activations), or int8 rows (s8_rows: head_dim codes then a float32 scale, so the
// rows' last dim is head_dim + 4 bytes); scores, softmax and sums in float32. A fully masked row
// gives zeros (as ir/ops/sdpa.py promises). Optional additive mask [batch, heads, q_len, kv_len], float32 or
// bfloat16, stride 0 broadcasting a dim, last dim contiguous.
struct DecodeAttentionArgs {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* out = nullptr;
    DType dtype = DType::f32;     // of q and out
    DType kv_dtype = DType::f32;  // of k and v (f32, bf16 or s8_rows)
    int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
    int64_t q_strides[3] = {}, k_strides[3] = {}, v_strides[3] = {}, out_strides[3] = {};
    float scale = 1.0f;
    const void* mask = nullptr;
    DType mask_dtype = DType::f32;
    int64_t mask_strides[3] = {};
    int threads = 1;
};

}  // namespace ipxc
