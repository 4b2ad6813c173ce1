// Python binding of the to_channels_last kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

// x [N, C, H, W] (contiguous) into out [N, H, W, C] (contiguous, i.e. the NHWC view of a
// channels-last tensor): float32/bf16 out converts, int8/uint8 out quantizes per tensor.
// Returns whether every value of x is finite when check_finite (true otherwise).
bool to_channels_last(nb::handle x_obj, nb::handle out_obj, float scale, int zero_point, const OptStr& max_isa,
                      int threads, bool check_finite) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    ChannelsLastArgs a;
    a.dtype = activation_dtype(x);
    check_cpu_contiguous(out);
    if (x.ndim() != 4) fail("x " + x.shape_str() + " must be 4-D [N, C, H, W]");
    if (out.ndim() != 4 || out.shape(0) != x.shape(0) || out.shape(1) != x.shape(2) || out.shape(2) != x.shape(3) ||
        out.shape(3) != x.shape(1))
        fail("out " + out.shape_str() + " must be x " + x.shape_str() + " as [N, H, W, C]");
    a.quantized = is(out, nb::dtype<int8_t>()) || is(out, nb::dtype<uint8_t>());
    if (a.quantized) {
        a.out_unsigned = quantized_unsigned(out);
        if (!(scale > 0.0f) || scale == std::numeric_limits<float>::infinity())
            fail("scale must be positive and finite, got " + std::to_string(scale));
        const int lo = a.out_unsigned ? 0 : -128, hi = a.out_unsigned ? 255 : 127;
        if (zero_point < lo || zero_point > hi)
            fail("zero point " + std::to_string(zero_point) + " is outside the quantized range [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]");
    } else {
        a.out_dtype = activation_dtype(out);
    }
    a.x = x.data();
    a.y = out.data();
    a.batch = x.shape(0);
    a.channels = x.shape(1);
    a.pixels = x.shape(2) * x.shape(3);
    a.scale = scale;
    a.zero_point = zero_point;
    a.threads = threads;
    if (!check_finite) {  // (its arguments then point only into x and out: a capture may record the call)
        run_capturable(lookup_to_channels_last(select(max_isa)), "to_channels_last", a);
        return true;
    }
    int32_t nonfinite = 0;
    a.nonfinite = &nonfinite;
    run(lookup_to_channels_last(select(max_isa)), "to_channels_last", a);
    return nonfinite == 0;
}

}  // namespace

void bind_to_channels_last(nb::module_& m) {
    m.def("to_channels_last", &to_channels_last, "x"_a, "out"_a, "scale"_a, "zero_point"_a, "max_isa"_a.none(),
          "threads"_a, "check_finite"_a = false,
          "x [N, C, H, W] written into out [N, H, W, C]: converted, or quantized for an int8/uint8 out; returns "
          "False when check_finite and x holds a NaN or an infinity (out is written all the same), else True");
}

}  // namespace ipxc
