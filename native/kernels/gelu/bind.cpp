// Python binding of the gelu kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void gelu(nb::handle x_obj, bool tanh, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    GeluArgs a;
    a.dtype = activation_dtype(x);
    check_like(out, x);
    a.x = x.data();
    a.y = out.data();
    a.n = x.size();
    a.tanh = tanh;
    a.threads = threads;
    run_capturable(lookup_gelu(select(max_isa)), "gelu", a);
}

}  // namespace

void bind_gelu(nb::module_& m) {
    m.def("gelu", &gelu, "x"_a, "tanh"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
