// quantize_last_axis: float32/bfloat16 -> int8/uint8 with one multiplier per channel of the
// LAST axis (SmoothQuant smoothing folded into the activation quantize step):
//   y[..., c] = clamp(nearbyint(x[..., c] * inv_scale[c]) + zero_point),  c = column,
// bit-identical to torch.clamp(torch.round(x.float() * inv_scales) + zero_point, lo, hi): the
// product is rounded to float first, then rounded half to even, then shifted by the (integer)
// zero point. Like quantize.cpp, compiled with -ffp-contract=off (CMakeLists.txt) so nothing
// fuses the multiply into a later add.
#include "quant.h"

namespace ipxc {
namespace IPXC_NS {

template <class T, class Q>
static void quantize_last_axis_rows(const QuantizeLastAxisArgs& a, int64_t r0, int64_t r1) {
    const float* __restrict inv = a.inv_scales;
    const int32_t zp = a.zero_point;
    // Clamping to the range shifted by zp before rounding equals clamping after adding it (both
    // bounds are integers), and keeps the add an exact integer add.
    const float lo = QRange<Q>::lo - static_cast<float>(zp), hi = QRange<Q>::hi - static_cast<float>(zp);
    for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict x = static_cast<const T*>(a.x) + r * a.cols;
        Q* __restrict y = static_cast<Q*>(a.y) + r * a.cols;
#pragma omp simd
        for (int64_t c = 0; c < a.cols; ++c) y[c] = static_cast<Q>(round_clamp(load(x[c]) * inv[c], lo, hi) + zp);
    }
}

static void quantize_last_axis(const QuantizeLastAxisArgs& a) {
    if (a.cols <= 0) return;
    const bool bf16 = a.dtype == DType::bf16;
    parallel(a.rows, row_grain(a.cols), a.threads, [&](int64_t r0, int64_t r1) {
        if (a.out_unsigned)
            bf16 ? quantize_last_axis_rows<uint16_t, uint8_t>(a, r0, r1) : quantize_last_axis_rows<float, uint8_t>(a, r0, r1);
        else
            bf16 ? quantize_last_axis_rows<uint16_t, int8_t>(a, r0, r1) : quantize_last_axis_rows<float, int8_t>(a, r0, r1);
    });
}

IPXC_REGISTER_KERNEL(quantize_last_axis, quantize_last_axis);

}  // namespace IPXC_NS
}  // namespace ipxc
