// rope_kv_append: q and k rotated, k and v written into the caches, one row (batch, position, head) at a time.
#include "rope_row.h"

namespace ipxc {
namespace IPXC_NS {

static void rope_kv_append(const RopeKvAppendArgs& a) {
    const int64_t d = a.dim, per_position = a.heads + 2 * a.kv_heads;
    const int64_t rows = a.batch * a.seq * per_position;
    parallel(rows, row_grain(d), a.threads, [&](int64_t begin, int64_t end) {
        float x[1024], c[1024], s[1024], y[1024];  // head size <= 1024 (the binding checks)
        int64_t cached_table_row = -1;
        for (int64_t r = begin; r < end; ++r) {
            const int64_t b = r / (a.seq * per_position), t = (r / per_position) % a.seq, slot = r % per_position;
            // slot: q heads, then k heads, then v heads
            const int part = slot < a.heads ? 0 : slot < a.heads + a.kv_heads ? 1 : 2;
            const int64_t h = part == 0 ? slot : part == 1 ? slot - a.heads : slot - a.heads - a.kv_heads;
            const int64_t source = b * a.source_strides[part][0] + t * a.source_strides[part][1] + h * d;
            load_any(a.dtype, a.source[part], source, d, x);
            const float* row = x;
            if (part < 2) {
                const int64_t table_row = ((a.table_batch == 1 ? 0 : b) * a.seq + t) * d;
                if (table_row != cached_table_row) {  // the heads of one position share their table row
                    load_any(a.table_dtype, a.cos, table_row, d, c);
                    load_any(a.table_dtype, a.sin, table_row, d, s);
                    cached_table_row = table_row;
                }
                rotate_half_row(x, c, s, y, d);
                row = y;
                if (part == 1 && a.cache_dtype == DType::s8_rows && a.dtype == DType::bf16)
                    round_to_bf16(y, d);  // rope's result in the projections' dtype first, as ir/ops/rope_kv_append.py
            }
            if (part == 0)
                store_any(a.dtype, row, a.q_out, ((b * a.heads + h) * a.seq + t) * d, d);
            else
                store_any(a.cache_dtype, row, part == 1 ? a.key_cache : a.value_cache,
                          ((b * a.kv_heads + h) * a.capacity + a.position + t) * cache_row_elements(a.cache_dtype, d),
                          d);
        }
    });
}

IPXC_REGISTER_KERNEL(rope_kv_append, rope_kv_append);

}  // namespace IPXC_NS
}  // namespace ipxc
