// Python binding of the spatial_mean kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

// The mean over H and W of x [N, C, H, W] (contiguous; or, with channels_last, its NHWC view
// [N, H, W, C]) into out [N, C] of x's dtype.
void spatial_mean(nb::handle x_obj, bool channels_last, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    SpatialMeanArgs a;
    a.dtype = activation_dtype(x);
    check_cpu_contiguous(out);
    check_same_dtype(out, x);
    if (x.ndim() != 4) fail("x " + x.shape_str() + " must be 4-D");
    a.batch = x.shape(0);
    a.channels = channels_last ? x.shape(3) : x.shape(1);
    a.pixels = channels_last ? x.shape(1) * x.shape(2) : x.shape(2) * x.shape(3);
    if (a.pixels == 0) fail("x " + x.shape_str() + " has no pixels to average");
    if (out.ndim() != 2 || out.shape(0) != a.batch || out.shape(1) != a.channels)
        fail("out " + out.shape_str() + " must be [" + std::to_string(a.batch) + ", " + std::to_string(a.channels) + "]");
    a.channels_last = channels_last;
    a.x = x.data();
    a.y = out.data();
    a.threads = threads;
    run_capturable(lookup_spatial_mean(select(max_isa)), "spatial_mean", a);
}

}  // namespace

void bind_spatial_mean(nb::module_& m) {
    m.def("spatial_mean", &spatial_mean, "x"_a, "channels_last"_a, "out"_a, "max_isa"_a.none(), "threads"_a,
          "out [N, C] = the mean of x over H and W (x NCHW, or its NHWC view with channels_last)");
}

}  // namespace ipxc
