// Python binding of the concat_channels kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

// out = cat([a, b], dim=1) for 4-D a, b with contiguous channels (other strides free), out
// channels-last [N, Ca + Cb, H, W] of their dtype.
void concat_channels(nb::handle a_obj, nb::handle b_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg a(a_obj, "a"), b(b_obj, "b"), out(out_obj, "out");
    ConcatChannelsArgs args;
    for (const TensorArg* t : {&a, &b, &out})
        if (!t->on_cpu() || t->ndim() != 4) fail(std::string(t->name()) + " " + t->shape_str() + " must be a 4-D CPU tensor");
    check_same_dtype(b, a);
    check_same_dtype(out, a);
    args.batch = a.shape(0), args.height = a.shape(2), args.width = a.shape(3);
    if (b.shape(0) != args.batch || b.shape(2) != args.height || b.shape(3) != args.width)
        fail("b " + b.shape_str() + " must match a " + a.shape_str() + " in every dim but the channels");
    if (out.shape(0) != args.batch || out.shape(1) != a.shape(1) + b.shape(1) || out.shape(2) != args.height ||
        out.shape(3) != args.width)
        fail("out " + out.shape_str() + " must be [N, Ca + Cb, H, W] for a " + a.shape_str() + " and b " + b.shape_str());
    const int64_t c = out.shape(1), h = args.height, w = args.width;
    if (out.stride(1) != 1 || out.stride(3) != c || out.stride(2) != w * c || out.stride(0) != h * w * c)
        fail("out " + out.shape_str() + " must be dense channels-last (torch.channels_last)");
    const TensorArg* inputs[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
        const TensorArg& t = *inputs[i];
        if (t.shape(1) > 1 && t.stride(1) != 1)
            fail(std::string(t.name()) + " " + t.shape_str() + " needs contiguous channels (stride 1 along dim 1)");
        args.src[i] = t.data();
        args.channels[i] = t.shape(1);
        args.strides[i][0] = t.stride(0), args.strides[i][1] = t.stride(2), args.strides[i][2] = t.stride(3);
    }
    args.out = out.data();
    args.itemsize = (out.dtype().bits * out.dtype().lanes + 7) / 8;
    args.threads = threads;
    run_capturable(lookup_concat_channels(select(max_isa)), "concat_channels", args);
}

}  // namespace

void bind_concat_channels(nb::module_& m) {
    m.def("concat_channels", &concat_channels, "a"_a, "b"_a, "out"_a, "max_isa"_a.none(), "threads"_a,
          "out = cat([a, b], dim=1), a and b with contiguous channels, out channels-last");
}

}  // namespace ipxc
