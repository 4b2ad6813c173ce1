// Python binding of the softmax kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void softmax(nb::handle x_obj, double scale, nb::handle mask_obj, nb::handle out_obj, const OptStr& max_isa,
             int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    const auto mask = optional_tensor(mask_obj, "mask");
    SoftmaxArgs a;
    a.dtype = activation_dtype(x);
    rows_cols(x, &a.rows, &a.cols);
    check_like(out, x);
    if (mask) {
        // The mask has x's rank; a broadcast dim has size 1 (any stride); the last dim is
        // x's and contiguous.
        const TensorArg& m = *mask;
        const int nd = x.ndim();
        a.mask_dtype = additive_mask_dtype(m);
        if (m.ndim() != nd) fail("mask " + m.shape_str() + " must have the rank of x " + x.shape_str());
        if (nd - 1 > kMaxMaskDims) fail("a masked softmax supports at most " + std::to_string(kMaxMaskDims + 1) + " dims");
        for (int d = 0; d < nd; ++d)
            if (m.shape(d) != x.shape(d) && m.shape(d) != 1)
                fail("mask " + m.shape_str() + " does not broadcast to x " + x.shape_str());
        if (m.shape(nd - 1) != a.cols || (a.cols > 1 && m.stride(nd - 1) != 1))
            fail("mask " + m.shape_str() + " needs a contiguous last dim of " + std::to_string(a.cols) + " elements");
        a.lead_ndim = nd - 1;
        for (int d = 0; d < a.lead_ndim; ++d) {
            a.lead_shape[d] = x.shape(d);
            a.mask_strides[d] = m.shape(d) == 1 ? 0 : m.stride(d);
        }
        a.mask = m.data();
    }
    a.x = x.data();
    a.y = out.data();
    a.scale = static_cast<float>(scale);
    a.threads = threads;
    run(lookup_softmax(select(max_isa)), "softmax", a);
}

}  // namespace

void bind_softmax(nb::module_& m) {
    m.def("softmax", &softmax, "x"_a, "scale"_a, "mask"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
