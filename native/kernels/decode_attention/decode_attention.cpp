// decode_attention: one query row at a time against the whole cache, in float32: the scores of every key
// (a dot product each), their softmax (exp_approx, ~2 ulp), then the value rows weighted by it. Parallel
// over (batch, head). Meant for decode steps (a few query rows); longer prompts go to the blocked kernels.
#include <cmath>

#include "common.h"
#include "ipxc/parallel.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static inline float dot_row(const float* __restrict q, const T* __restrict k, int64_t d) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; ++i) s += q[i] * load(k[i]);
    return s;
}

template <class T>
static inline void add_row(float* __restrict acc, float w, const T* __restrict v, int64_t d) {
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) acc[i] += w * load(v[i]);
}

template <class T, class M>
static void attend_row(const DecodeAttentionArgs& a, int64_t b, int64_t h, int64_t t, float* scores, float* q, float* acc) {
    const int64_t d = a.head_dim, kvh = h / (a.heads / a.kv_heads);
    const T* qrow = static_cast<const T*>(a.q) + b * a.q_strides[0] + h * a.q_strides[1] + t * a.q_strides[2];
    for (int64_t i = 0; i < d; ++i) q[i] = load(qrow[i]) * a.scale;
    const T* k = static_cast<const T*>(a.k) + b * a.k_strides[0] + kvh * a.k_strides[1];
    const T* v = static_cast<const T*>(a.v) + b * a.v_strides[0] + kvh * a.v_strides[1];
    const M* mask = a.mask ? static_cast<const M*>(a.mask) + b * a.mask_strides[0] + h * a.mask_strides[1] +
                                 t * a.mask_strides[2]
                           : nullptr;
    float row_max = -INFINITY;
    for (int64_t j = 0; j < a.kv_len; ++j) {
        float s = dot_row(q, k + j * a.k_strides[2], d);
        if (mask) s += load(mask[j]);
        scores[j] = s;
        row_max = s > row_max ? s : row_max;
    }
    for (int64_t i = 0; i < d; ++i) acc[i] = 0.0f;
    if (row_max != -INFINITY) {  // a fully masked row stays zeros
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < a.kv_len; ++j) {
            scores[j] = exp_approx(scores[j] - row_max);  // the largest is 1; masked keys give 0
            sum += scores[j];
        }
        for (int64_t j = 0; j < a.kv_len; ++j)
            if (scores[j] != 0.0f) add_row(acc, scores[j], v + j * a.v_strides[2], d);
        const float inv = 1.0f / sum;
        for (int64_t i = 0; i < d; ++i) acc[i] *= inv;
    }
    T* out = static_cast<T*>(a.out) + b * a.out_strides[0] + h * a.out_strides[1] + t * a.out_strides[2];
    if constexpr (sizeof(T) == 4) {
        for (int64_t i = 0; i < d; ++i) out[i] = acc[i];
    } else {
        f32_row_to_bf16(acc, out, d);
    }
}

template <class T>
static void attend(const DecodeAttentionArgs& a, int64_t b, int64_t h, float* scratch) {
    float* q = scratch;
    float* acc = scratch + a.head_dim;
    float* scores = scratch + 2 * a.head_dim;
    for (int64_t t = 0; t < a.q_len; ++t) {
        if (a.mask && a.mask_dtype == DType::bf16)
            attend_row<T, uint16_t>(a, b, h, t, scores, q, acc);
        else
            attend_row<T, float>(a, b, h, t, scores, q, acc);
    }
}

static void decode_attention(const DecodeAttentionArgs& a) {
    const int64_t scratch_size = 2 * a.head_dim + a.kv_len;
    parallel(a.batch * a.heads, 1, a.threads, [&](int64_t begin, int64_t end) {
        float* scratch = scratch_floats(scratch_size);
        for (int64_t unit = begin; unit < end; ++unit) {
            const int64_t b = unit / a.heads, h = unit % a.heads;
            if (a.dtype == DType::bf16)
                attend<uint16_t>(a, b, h, scratch);
            else
                attend<float>(a, b, h, scratch);
        }
    });
}

IPXC_REGISTER_KERNEL(decode_attention, decode_attention);

}  // namespace IPXC_NS
}  // namespace ipxc
