// silu_mul: y = silu(a) * b, the gate of SwiGLU MLPs, in one pass instead of two; a and b are rows of
// any stride (the two halves of a merged gate/up GEMM output), y is contiguous. float32 arithmetic,
// rounded once to the output dtype.
#include "common.h"

namespace ipxc {
namespace IPXC_NS {

template <class T>
static void silu_mul_row(const RowsBinaryArgs& args, int64_t row, int64_t begin, int64_t end) {
    const T* __restrict a = static_cast<const T*>(args.a) + row * args.a_row_stride;
    const T* __restrict b = static_cast<const T*>(args.b) + row * args.b_row_stride;
    elementwise_range<T>(static_cast<T*>(args.y) + row * args.cols, begin, end, [a, b](int64_t i) {
        const float v = load(a[i]);
        return v / (1.0f + exp_approx(-v)) * load(b[i]);
    });
}

template <class T>
static void silu_mul_typed(const RowsBinaryArgs& args) {
    if (args.rows == 1) {  // a decode step: its one row split among the threads
        parallel(args.cols, kElementGrain, args.threads,
                 [&](int64_t begin, int64_t end) { silu_mul_row<T>(args, 0, begin, end); });
        return;
    }
    parallel(args.rows, row_grain(args.cols), args.threads, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) silu_mul_row<T>(args, r, 0, args.cols);
    });
}

static void silu_mul(const RowsBinaryArgs& args) {
    if (args.dtype == DType::bf16)
        silu_mul_typed<uint16_t>(args);
    else
        silu_mul_typed<float>(args);
}

IPXC_REGISTER_KERNEL(silu_mul, silu_mul);

}  // namespace IPXC_NS
}  // namespace ipxc
