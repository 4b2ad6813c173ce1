// rope: rotate-half rotary embedding of one row (one batch, head and position) at a time, in float32.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void load_row(const void* base, int64_t offset, int64_t n, float* __restrict dst) {
    const T* __restrict src = static_cast<const T*>(base) + offset;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = load(src[i]);
}

static void load_any(DType dtype, const void* base, int64_t offset, int64_t n, float* dst) {
    if (dtype == DType::bf16)
        load_row<uint16_t>(base, offset, n, dst);
    else
        load_row<float>(base, offset, n, dst);
}

static void rope(const RopeArgs& a) {
    const int64_t rows = a.batch * a.heads * a.seq, d = a.dim, half = d / 2;
    parallel(rows, row_grain(d), a.threads, [&](int64_t begin, int64_t end) {
        // Rows of up to 1024 elements (the binding checks): a head size is 64-256.
        float x[1024], c[1024], s[1024], y[1024];
        for (int64_t r = begin; r < end; ++r) {
            const int64_t b = r / (a.heads * a.seq), h = (r / a.seq) % a.heads, t = r % a.seq;
            load_any(a.dtype, a.x, b * a.x_strides[0] + h * a.x_strides[1] + t * a.x_strides[2], d, x);
            const int64_t table_row = ((a.table_batch == 1 ? 0 : b) * a.seq + t) * d;
            load_any(a.table_dtype, a.cos, table_row, d, c);
            load_any(a.table_dtype, a.sin, table_row, d, s);
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) y[i] = x[i] * c[i] - x[i + half] * s[i];
#pragma omp simd
            for (int64_t i = half; i < d; ++i) y[i] = x[i] * c[i] + x[i - half] * s[i];
            if (a.dtype == DType::bf16)
                f32_row_to_bf16(y, static_cast<uint16_t*>(a.out) + r * d, d);
            else {
                float* __restrict out = static_cast<float*>(a.out) + r * d;
#pragma omp simd
                for (int64_t i = 0; i < d; ++i) out[i] = y[i];
            }
        }
    });
}

IPXC_REGISTER_KERNEL(rope, rope);

}  // namespace IPXC_NS
}  // namespace ipxc
