// rope: rotate-half rotary embedding of one row (one batch, head and position) at a time, in float32.
#include "rope_row.h"

namespace ipxc {
namespace IPXC_NS {

static void rope(const RopeArgs& a) {
    const int64_t rows = a.batch * a.heads * a.seq, d = a.dim;
    parallel(rows, row_grain(d), a.threads, [&](int64_t begin, int64_t end) {
        // Rows of up to 1024 elements (the binding checks): a head size is 64-256.
        float x[1024], c[1024], s[1024], y[1024];
        for (int64_t r = begin; r < end; ++r) {
            const int64_t b = r / (a.heads * a.seq), h = (r / a.seq) % a.heads, t = r % a.seq;
            load_any(a.dtype, a.x, b * a.x_strides[0] + h * a.x_strides[1] + t * a.x_strides[2], d, x);
            const int64_t table_row = ((a.table_batch == 1 ? 0 : b) * a.seq + t) * d;
            load_any(a.table_dtype, a.cos, table_row, d, c);
            load_any(a.table_dtype, a.sin, table_row, d, s);
            rotate_half_row(x, c, s, y, d);
            store_any(a.dtype, y, a.out, r * d, d);
        }
    });
}

IPXC_REGISTER_KERNEL(rope, rope);

}  // namespace IPXC_NS
}  // namespace ipxc
