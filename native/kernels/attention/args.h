// The argument struct(s) of the attention kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// Attention softmax(q k^T * scale + mask) v over [batch, heads, seq, head_dim] tensors whose
// last dim is contiguous; the other dims may have any element strides (strides[0..2] = batch,
// head, seq), so q/k/v can be views into one packed QKV projection and out a view into a
// [batch, seq, heads, head_dim] buffer. `attention`: bf16, head_dim a multiple of 32, built for
// avx512_bf16 and amx. `attention_f32`: fp32, head_dim a multiple of 16, built for avx2 and avx512.
struct AttentionArgs {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    void* out = nullptr;
    int64_t batch = 0, heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
    // Grouped-query attention (attention_f32 only): k and v have kv_heads heads, a divisor of heads, and
    // query head h reads kv head h / (heads / kv_heads). 0: as many as q.
    int64_t kv_heads = 0;
    int64_t q_strides[3] = {}, k_strides[3] = {}, v_strides[3] = {}, out_strides[3] = {};
    float scale = 1.0f;
    // Optional additive mask [batch, heads, q_len, kv_len] with a contiguous last dim; stride 0
    // broadcasts a dim.
    const void* mask = nullptr;
    DType mask_dtype = DType::f32;
    int64_t mask_strides[3] = {};
    int threads = 1;
    // Optional: out holds int8/uint8 codes instead of q's dtype, of the output values as that dtype
    // holds them (bf16-rounded for `attention`), quantized as NormArgs' q is (per tensor with
    // q_scale, or with q_multipliers: heads * head_dim floats, index h * head_dim + d, i.e. along
    // the last axis of out viewed as [batch, q_len, heads * head_dim]).
    bool quantized = false;
    bool q_unsigned = true;
    float q_scale = 1.0f;
    int32_t q_zero_point = 0;
    const float* q_multipliers = nullptr;
};

}  // namespace ipxc
