// softmax over the last dim of x * scale (+ mask), in fp32: y = exp(v - max) / sum(exp(v - max)).
// The mask is additive (0 / -inf style) and broadcast over rows through per-dim strides, so an
// attention mask [batch, 1, 1, keys] serves scores [batch, heads, queries, keys] without a copy.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

// Element offset of row r's mask row: unravel r over the leading dims, dot with the strides.
static int64_t mask_row_offset(const SoftmaxArgs& a, int64_t r) {
    int64_t offset = 0;
    for (int d = a.lead_ndim - 1; d >= 0; --d) {
        const int64_t size = a.lead_shape[d];
        offset += (r % size) * a.mask_strides[d];
        r /= size;
    }
    return offset;
}

template <class T, class M>  // M: mask element type; ignored when there is no mask
static void softmax_rows(const SoftmaxArgs& a, int64_t begin, int64_t end) {
    const int64_t n = a.cols;
    const float scale = a.scale;
    float* scratch = sizeof(T) == 4 ? nullptr : scratch_floats(n);
    for (int64_t r = begin; r < end; ++r) {
        const T* __restrict x = static_cast<const T*>(a.x) + r * n;
        // Work in fp32: in y itself for fp32, in the scratch row for bf16.
        float* __restrict v = sizeof(T) == 4 ? static_cast<float*>(a.y) + r * n : scratch;

        float max = -__builtin_inff();
        if (a.mask) {
            const M* __restrict m = static_cast<const M*>(a.mask) + mask_row_offset(a, r);
#pragma omp simd reduction(max : max)
            for (int64_t i = 0; i < n; ++i) {
                v[i] = load(x[i]) * scale + load(m[i]);
                max = v[i] > max ? v[i] : max;
            }
        } else {
#pragma omp simd reduction(max : max)
            for (int64_t i = 0; i < n; ++i) {
                v[i] = load(x[i]) * scale;
                max = v[i] > max ? v[i] : max;
            }
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; ++i) {
            v[i] = exp_approx(v[i] - max);
            sum += v[i];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) v[i] *= inv;
        if constexpr (sizeof(T) == 2) f32_row_to_bf16(v, static_cast<uint16_t*>(a.y) + r * n, n);
    }
}

template <class T>
static void softmax_rows_for(const SoftmaxArgs& a, int64_t begin, int64_t end) {
    if (a.mask && a.mask_dtype == DType::bf16)
        softmax_rows<T, uint16_t>(a, begin, end);
    else
        softmax_rows<T, float>(a, begin, end);
}

static void softmax(const SoftmaxArgs& a) {
    parallel(a.rows, row_grain(a.cols), a.threads, [&](int64_t begin, int64_t end) {
        if (a.dtype == DType::bf16)
            softmax_rows_for<uint16_t>(a, begin, end);
        else
            softmax_rows_for<float>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(softmax, softmax);

}  // namespace IPXC_NS
}  // namespace ipxc
