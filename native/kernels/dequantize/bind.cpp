// Python binding of the dequantize kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void dequantize(nb::handle q_obj, nb::handle scales_obj, nb::handle zps_obj, bool per_channel, nb::handle out_obj,
                const OptStr& max_isa, int threads) {
    const TensorArg q(q_obj, "q"), scales(scales_obj, "scales"), zps(zps_obj, "zero_points"), out(out_obj, "out");
    DequantizeArgs a;
    a.in_unsigned = quantized_unsigned(q);
    a.dtype = activation_dtype(out);
    if (out.size() != q.size()) fail("out " + out.shape_str() + " does not have as many elements as q " + q.shape_str());
    channel_rows_cols(q, per_channel, &a.rows, &a.cols);
    check_qparams(scales, zps, per_channel, a.rows, a.in_unsigned);
    a.q = q.data();
    a.y = out.data();
    a.scales = static_cast<const float*>(scales.data());
    a.zero_points = static_cast<const int32_t*>(zps.data());
    a.per_channel = per_channel;
    a.threads = threads;
    run_capturable(lookup_dequantize(select(max_isa)), "dequantize", a);
}

}  // namespace

void bind_dequantize(nb::module_& m) {
    m.def("dequantize", &dequantize, "q"_a, "scales"_a, "zero_points"_a, "per_channel"_a, "out"_a, "max_isa"_a.none(),
          "threads"_a);
}

}  // namespace ipxc
