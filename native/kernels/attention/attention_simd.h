// Helpers of the attention kernels (head_at and the exp pass: both; the max pass: attention_f32.cpp, the
// bf16 kernel folds it into its products), written over V16 (vec16.h) so they build at every level the
// kernels do. Included inside nothing: it opens ipxc::IPXC_NS itself, like common.h.
#pragma once

#include "common.h"
#include "vec16.h"

namespace ipxc {
namespace IPXC_NS {

// Element (b, h, 0, 0) of a [batch, heads, seq, head_dim] tensor whose element strides for
// batch, head and seq are strides[0..2] (AttentionArgs' q/k/v/out/mask).
template <class T>
inline T* head_at(const void* base, const int64_t* strides, int64_t b, int64_t h) {
    return const_cast<T*>(static_cast<const T*>(base)) + b * strides[0] + h * strides[1];
}

// The two passes over a row of scores (the bf16 kernel uses the second with its own e^x). Pass 1: s = s * scale + mask in
// place, -inf past kv_len (so e = 0 there), returning the row's max. Two vectors a step
// (kv_pad is a multiple of 32) so the max chains run two abreast.
template <class M>
inline float scale_mask_max(float* __restrict s, const M* __restrict mask, float scale, int64_t kv_len,
                            int64_t kv_pad) {
    const V16 scale16 = v_set1(scale), minus_inf = v_set1(-__builtin_inff());
    V16 max_a = minus_inf, max_b = minus_inf;
    for (int64_t j = 0; j < kv_pad; j += 32) {
        const V16Lanes lanes_a = v_lanes_below(kv_len - j), lanes_b = v_lanes_below(kv_len - j - 16);
        const V16 mask_a = mask ? v_load(mask + j, lanes_a) : v_zero();
        const V16 mask_b = mask ? v_load(mask + j + 16, lanes_b) : v_zero();
        V16 a = v_fma(v_load(s + j), scale16, mask_a);
        V16 b = v_fma(v_load(s + j + 16), scale16, mask_b);
        a = v_select(lanes_a, a, minus_inf);
        b = v_select(lanes_b, b, minus_inf);
        v_store(s + j, a);
        v_store(s + j + 16, b);
        max_a = v_max(max_a, a);
        max_b = v_max(max_b, b);
    }
    return v_reduce_max(v_max(max_a, max_b));
}

// Whether a query row's n mask values are all -inf: the mask removes every key, and the op says such a row comes
// out as 0 (ir/ops/sdpa.py). Asked only of rows whose softmax sum came out NaN (then the row max was -inf or NaN),
// so a plain loop.
template <class M>
inline bool removes_every_key(const M* mask, int64_t n) {
    for (int64_t j = 0; j < n; ++j)
        if (load(mask[j]) != -__builtin_inff()) return false;
    return true;
}

// Pass 2: e = exp(s - max) with the caller's e^x, handed to store(j, e[j .. j + 16), e[j + 16 .. j + 32))
// as two V16; returns the lane-wise sums of the unrounded values. store may overwrite s[j, j + 32) (no
// restrict on s).
template <class Exp, class Store>
__attribute__((always_inline)) inline V16 exp_and_sum_lanes(const float* s, float row_max, int64_t kv_pad, const Exp& exp, const Store& store) {
    const V16 max = v_set1(row_max);
    V16 sum_a = v_zero(), sum_b = v_zero();
    for (int64_t j = 0; j < kv_pad; j += 32) {
        const V16 a = exp(v_sub(v_load(s + j), max));
        const V16 b = exp(v_sub(v_load(s + j + 16), max));
        sum_a = v_add(sum_a, a);
        sum_b = v_add(sum_b, b);
        store(j, a, b);
    }
    return v_add(sum_a, sum_b);
}

// Pass 2 with v_exp (the fp32 softmax); returns 1 / sum(e).
template <class Store>
inline float exp_and_sum(const float* s, float row_max, int64_t kv_pad, const Store& store) {
    return 1.0f / v_sum(exp_and_sum_lanes(s, row_max, kv_pad, [](V16 x) { return v_exp(x); }, store));
}

}  // namespace IPXC_NS
}  // namespace ipxc
