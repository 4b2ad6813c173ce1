// Python binding of the quantize_last_axis kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

// Per-channel multipliers along the last axis (SmoothQuant activations): x [..., C], inv_scales [C].
void quantize_last_axis(nb::handle x_obj, nb::handle inv_obj, int zero_point, nb::handle out_obj, const OptStr& max_isa,
                        int threads) {
    const TensorArg x(x_obj, "x"), inv(inv_obj, "inv_scales"), out(out_obj, "out");
    QuantizeLastAxisArgs a;
    a.dtype = activation_dtype(x);
    rows_cols(x, &a.rows, &a.cols);
    a.out_unsigned = quantized_unsigned(out);
    if (out.size() != x.size()) fail("out " + out.shape_str() + " does not have as many elements as x " + x.shape_str());
    a.inv_scales = f32_vector(inv, a.cols);
    const int lo = a.out_unsigned ? 0 : -128, hi = a.out_unsigned ? 255 : 127;
    if (zero_point < lo || zero_point > hi)
        fail("zero_point " + std::to_string(zero_point) + " is outside the quantized range [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    a.x = x.data();
    a.y = out.data();
    a.zero_point = zero_point;
    a.threads = threads;
    run(lookup_quantize_last_axis(select(max_isa)), "quantize_last_axis", a);
}

}  // namespace

void bind_quantize_last_axis(nb::module_& m) {
    m.def("quantize_last_axis", &quantize_last_axis, "x"_a, "inv_scales"_a, "zero_point"_a, "out"_a, "max_isa"_a.none(),
          "threads"_a);
}

}  // namespace ipxc
