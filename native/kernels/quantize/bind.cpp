// Python binding of the quantize kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void quantize(nb::handle x_obj, nb::handle scales_obj, nb::handle zps_obj, bool per_channel, nb::handle out_obj,
              const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), scales(scales_obj, "scales"), zps(zps_obj, "zero_points"), out(out_obj, "out");
    QuantizeArgs a;
    a.dtype = activation_dtype(x);
    a.out_unsigned = quantized_unsigned(out);
    if (out.size() != x.size()) fail("out " + out.shape_str() + " does not have as many elements as x " + x.shape_str());
    channel_rows_cols(x, per_channel, &a.rows, &a.cols);
    check_qparams(scales, zps, per_channel, a.rows, a.out_unsigned);
    a.x = x.data();
    a.y = out.data();
    a.scales = static_cast<const float*>(scales.data());
    a.zero_points = static_cast<const int32_t*>(zps.data());
    a.per_channel = per_channel;
    a.threads = threads;
    run_capturable(lookup_quantize(select(max_isa)), "quantize", a);
}

}  // namespace

void bind_quantize(nb::module_& m) {
    m.def("quantize", &quantize, "x"_a, "scales"_a, "zero_points"_a, "per_channel"_a, "out"_a, "max_isa"_a.none(),
          "threads"_a);
}

}  // namespace ipxc
