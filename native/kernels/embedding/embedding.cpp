// embedding: y[i, :] = weight[indices[i], :] for float32/bfloat16 tables, int64/int32 indices.
// All indices are checked before anything is copied, so a bad one is reported (bad_position)
// instead of reading outside the table.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class I>
static int64_t first_bad_index(const I* idx, int64_t n, int64_t vocab) {
    for (int64_t i = 0; i < n; ++i)
        if (idx[i] < 0 || static_cast<int64_t>(idx[i]) >= vocab) return i;
    return -1;
}

template <class I>
static void copy_rows(const EmbeddingArgs& a, int64_t begin, int64_t end) {
    const I* idx = static_cast<const I*>(a.indices);
    const int64_t row_bytes = a.dim * (a.dtype == DType::bf16 ? 2 : 4);
    const char* w = static_cast<const char*>(a.weight);
    char* y = static_cast<char*>(a.y);
    for (int64_t i = begin; i < end; ++i)
        std::memcpy(y + i * row_bytes, w + static_cast<int64_t>(idx[i]) * row_bytes, static_cast<size_t>(row_bytes));
}

static void embedding(const EmbeddingArgs& a) {
    const int64_t bad = a.indices_i32 ? first_bad_index(static_cast<const int32_t*>(a.indices), a.n, a.vocab)
                                      : first_bad_index(static_cast<const int64_t*>(a.indices), a.n, a.vocab);
    if (a.bad_position) *a.bad_position = bad;
    if (bad >= 0 || a.dim <= 0) return;
    // A row copy is pure memory traffic: waking a worker only pays off for large outputs
    // (at [128, 768] fp32, 384 KiB, two threads were slower than one).
    const int64_t row_bytes = a.dim * (a.dtype == DType::bf16 ? 2 : 4);
    const int64_t grain = (int64_t{1} << 19) / row_bytes;
    parallel(a.n, grain > 0 ? grain : 1, a.threads, [&](int64_t begin, int64_t end) {
        a.indices_i32 ? copy_rows<int32_t>(a, begin, end) : copy_rows<int64_t>(a, begin, end);
    });
}

IPXC_REGISTER_KERNEL(embedding, embedding);

}  // namespace IPXC_NS
}  // namespace ipxc
