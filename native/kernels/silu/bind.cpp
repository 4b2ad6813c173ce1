// Python binding of the silu kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void silu(nb::handle x_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    UnaryArgs a;
    a.dtype = activation_dtype(x);
    check_like(out, x);
    a.x = x.data();
    a.y = out.data();
    a.n = x.size();
    a.threads = threads;
    run(lookup_silu(select(max_isa)), "silu", a);
}

void silu_mul(nb::handle a_obj, nb::handle b_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(a_obj, "a"), gate(b_obj, "b"), out(out_obj, "out");
    BinaryArgs a;
    a.dtype = activation_dtype(x);
    check_like(gate, x);
    check_like(out, x);
    a.a = x.data();
    a.b = gate.data();
    a.y = out.data();
    a.n = x.size();
    a.threads = threads;
    run(lookup_silu_mul(select(max_isa)), "silu_mul", a);
}

}  // namespace

void bind_silu(nb::module_& m) {
    m.def("silu", &silu, "x"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu_mul", &silu_mul, "a"_a, "b"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
