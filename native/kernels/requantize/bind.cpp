// Python binding of the requantize kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void requantize(nb::handle acc_obj, nb::handle mult_obj, nb::handle bias_obj, int zero_point, nb::handle out_obj,
                const OptStr& max_isa, int threads) {
    const TensorArg acc(acc_obj, "acc"), mult(mult_obj, "multipliers"), out(out_obj, "out");
    const auto bias = optional_tensor(bias_obj, "bias");
    RequantizeArgs a;
    check_cpu_contiguous(acc);
    if (!is(acc, nb::dtype<int32_t>())) fail("acc has dtype " + acc.dtype_str() + "; it must be int32");
    rows_cols(acc, &a.rows, &a.cols);
    a.out_unsigned = quantized_unsigned(out);
    if (out.size() != acc.size()) fail("out " + out.shape_str() + " does not have as many elements as acc " + acc.shape_str());
    check_cpu_contiguous(mult);
    if (!mult.is_f32()) fail("multipliers has dtype " + mult.dtype_str() + "; it must be float32");
    if (mult.size() != a.cols && mult.size() != 1)
        fail("multipliers " + mult.shape_str() + " must have 1 or " + std::to_string(a.cols) +
             " elements (one per output channel: the last dim of acc)");
    a.per_channel = mult.size() != 1 || a.cols == 1;
    if (bias) {
        check_cpu_contiguous(*bias);
        if (!is(*bias, nb::dtype<int32_t>())) fail("bias has dtype " + bias->dtype_str() + "; it must be int32");
        if (bias->size() != a.cols)
            fail("bias " + bias->shape_str() + " must have " + std::to_string(a.cols) + " elements (the last dim of acc)");
        a.bias = static_cast<const int32_t*>(bias->data());
    }
    const int lo = a.out_unsigned ? 0 : -128, hi = a.out_unsigned ? 255 : 127;
    if (zero_point < lo || zero_point > hi)
        fail("zero_point " + std::to_string(zero_point) + " is outside the quantized range [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    a.acc = static_cast<const int32_t*>(acc.data());
    a.multipliers = static_cast<const float*>(mult.data());
    a.zero_point = zero_point;
    a.y = out.data();
    a.threads = threads;
    run(lookup_requantize(select(max_isa)), "requantize", a);
}

}  // namespace

void bind_requantize(nb::module_& m) {
    m.def("requantize", &requantize, "acc"_a, "multipliers"_a, "bias"_a.none(), "zero_point"_a, "out"_a,
          "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
