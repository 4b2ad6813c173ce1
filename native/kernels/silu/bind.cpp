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

// a, b [rows, cols] with contiguous rows (any row stride: column slices of one tensor), or contiguous of
// any shape (one row); out contiguous with as many elements.
void silu_mul(nb::handle a_obj, nb::handle b_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(a_obj, "a"), gate(b_obj, "b"), out(out_obj, "out");
    RowsBinaryArgs a;
    for (const TensorArg* t : {&x, &gate}) {
        if (!t->on_cpu()) fail(std::string(t->name()) + " is not on the CPU; move it with .cpu() first");
        check_same_dtype(*t, x);
        if (t->is_contiguous()) continue;
        if (t->ndim() != 2 || t->stride(1) != 1 || t->stride(0) < t->shape(1))
            fail(std::string(t->name()) + " " + t->shape_str() + " is neither contiguous nor rows of a 2-D tensor "
                 "with a contiguous last dim");
    }
    if (!x.is_f32() && !x.is_bf16())
        fail("a has dtype " + x.dtype_str() + "; silu_mul takes float32 or bfloat16");
    a.dtype = x.is_f32() ? DType::f32 : DType::bf16;
    const bool rows = !x.is_contiguous() || !gate.is_contiguous();
    if (rows && (x.ndim() != 2 || gate.ndim() != 2 || x.shape(0) != gate.shape(0) || x.shape(1) != gate.shape(1)))
        fail("a " + x.shape_str() + " and b " + gate.shape_str() + " must have the same 2-D shape");
    if (!rows && x.size() != gate.size()) fail("a " + x.shape_str() + " and b " + gate.shape_str() + " differ in size");
    a.rows = rows ? x.shape(0) : 1;
    a.cols = rows ? x.shape(1) : x.size();
    a.a_row_stride = rows ? x.stride(0) : a.cols;
    a.b_row_stride = rows ? gate.stride(0) : a.cols;
    check_cpu_contiguous(out);
    check_same_dtype(out, x);
    if (out.size() != a.rows * a.cols) fail("out " + out.shape_str() + " does not hold " + x.shape_str());
    a.a = x.data();
    a.b = gate.data();
    a.y = out.data();
    a.threads = threads;
    run_capturable(lookup_silu_mul(select(max_isa)), "silu_mul", a);
}

// x [..., 2 * cols] contiguous = [gate | up] along its last dim (a merged gate/up GEMM output); out [..., cols]
// contiguous, x's dtype: silu(gate) * up without a view made per call.
void silu_mul_halves(nb::handle x_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    check_cpu_contiguous(x);
    if (!x.is_f32() && !x.is_bf16())
        fail("x has dtype " + x.dtype_str() + "; silu_mul takes float32 or bfloat16");
    if (x.ndim() < 1 || x.shape(x.ndim() - 1) % 2 != 0)
        fail("x " + x.shape_str() + " needs an even last dim (gate and up halves)");
    RowsBinaryArgs a;
    a.dtype = x.is_f32() ? DType::f32 : DType::bf16;
    a.cols = x.shape(x.ndim() - 1) / 2;
    a.rows = a.cols > 0 ? x.size() / (2 * a.cols) : 0;
    a.a_row_stride = a.b_row_stride = 2 * a.cols;
    check_cpu_contiguous(out);
    check_same_dtype(out, x);
    if (out.size() != a.rows * a.cols) fail("out " + out.shape_str() + " does not hold half of x " + x.shape_str());
    const size_t element = a.dtype == DType::f32 ? 4 : 2;
    a.a = x.data();
    a.b = static_cast<const char*>(x.data()) + a.cols * element;
    a.y = out.data();
    a.threads = threads;
    if (a.rows > 0) run_capturable(lookup_silu_mul(select(max_isa)), "silu_mul", a);
}

}  // namespace

void bind_silu(nb::module_& m) {
    m.def("silu", &silu, "x"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu_mul", &silu_mul, "a"_a, "b"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu_mul_halves", &silu_mul_halves, "x"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
