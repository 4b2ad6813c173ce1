// Python binding of the rope kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

constexpr int64_t kMaxDim = 1024;  // rope.cpp's row buffers

DType float_dtype(const TensorArg& t) {
    if (!t.on_cpu()) fail(std::string(t.name()) + " is not on the CPU; move it with .cpu() first");
    if (t.is_f32()) return DType::f32;
    if (t.is_bf16()) return DType::bf16;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; rope takes float32 or bfloat16");
}

// x [batch, heads, seq, dim] (last dim contiguous); cos, sin [1 or batch, 1, seq, dim] contiguous;
// out [batch, heads, seq, dim] contiguous, x's dtype.
void rope(nb::handle x_obj, nb::handle cos_obj, nb::handle sin_obj, nb::handle out_obj, const OptStr& max_isa,
          int threads) {
    const TensorArg x(x_obj, "x"), cos(cos_obj, "cos"), sin(sin_obj, "sin"), out(out_obj, "out");
    RopeArgs a;
    a.dtype = float_dtype(x);
    if (x.ndim() != 4) fail("x must be [batch, heads, seq, dim], got " + x.shape_str());
    a.batch = x.shape(0), a.heads = x.shape(1), a.seq = x.shape(2), a.dim = x.shape(3);
    if (a.dim < 2 || a.dim % 2 != 0 || a.dim > kMaxDim)
        fail("the head size " + std::to_string(a.dim) + " must be even and at most " + std::to_string(kMaxDim));
    if (x.stride(3) != 1) fail("x " + x.shape_str() + " needs a contiguous last dim");
    for (int i = 0; i < 3; ++i) {
        if (x.stride(i) < 0) fail("x has a negative stride");
        a.x_strides[i] = x.stride(i);
    }
    a.table_dtype = float_dtype(cos);
    check_same_dtype(sin, cos);
    check_cpu_contiguous(cos);
    check_cpu_contiguous(sin);
    if (cos.ndim() != 4 || sin.ndim() != 4 || cos.shape(1) != 1 || cos.shape(2) != a.seq || cos.shape(3) != a.dim ||
        (cos.shape(0) != 1 && cos.shape(0) != a.batch))
        fail("cos " + cos.shape_str() + " must be [1 or " + std::to_string(a.batch) + ", 1, " + std::to_string(a.seq) +
             ", " + std::to_string(a.dim) + "]");
    for (int i = 0; i < 4; ++i)
        if (sin.shape(i) != cos.shape(i)) fail("sin " + sin.shape_str() + " and cos " + cos.shape_str() + " differ");
    a.table_batch = cos.shape(0);
    check_cpu_contiguous(out);
    check_same_dtype(out, x);
    if (out.ndim() != 4 || out.shape(0) != a.batch || out.shape(1) != a.heads || out.shape(2) != a.seq || out.shape(3) != a.dim)
        fail("out " + out.shape_str() + " must have x's shape " + x.shape_str());
    a.x = x.data(), a.cos = cos.data(), a.sin = sin.data(), a.out = out.data();
    a.threads = threads;
    run(lookup_rope(select(max_isa)), "rope", a);
}

}  // namespace

void bind_rope(nb::module_& m) {
    m.def("rope", &rope, "x"_a, "cos"_a, "sin"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
