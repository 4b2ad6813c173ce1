// Python binding of the bf16_gemv kernel: checks every tensor and size against each other before the kernel reads
// any of them (the weight comes from an artifact), fills the argument struct, runs the build for the selected level
// (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

constexpr int64_t kMaxRows = 4;

// out = x @ w^T + bias: x bfloat16 [..., k] contiguous, or 2-D with contiguous rows of any stride (at most 4 rows
// for bf16_gemv); w bfloat16 [n, k] contiguous; bias float32 [n] or None; out bfloat16 [..., n] contiguous with
// x's rows. `gemm`: run bf16_gemm (any number of rows) instead of bf16_gemv.
// bf16_gemm's epilogue operand: bfloat16 with out's rows of n, contiguous, sharing no memory with out (a row of it is
// read as that row of out is written).
const uint16_t* epilogue_operand(const TensorArg& operand, const TensorArg& out, int64_t m, int64_t n) {
    if (!operand.on_cpu() || !operand.is_bf16() || !operand.is_contiguous() || operand.size() != m * n ||
        (n > 0 && operand.shape(operand.ndim() - 1) != n))
        fail("operand must be a contiguous bfloat16 CPU tensor of out's " + std::to_string(m) + " rows of " +
             std::to_string(n) + ", got " + operand.dtype_str() + " " + operand.shape_str());
    if (overlaps(operand.data(), m * n * 2, out.data(), m * n * 2)) fail("operand must not share memory with out");
    return static_cast<const uint16_t*>(operand.data());
}

void bf16_linear(nb::handle x_obj, nb::handle w_obj, nb::handle bias_obj, nb::handle out_obj, const OptStr& max_isa,
                 int threads, bool gemm, std::optional<int> side_by_side = std::nullopt, bool silu = false,
                 nb::handle operand_obj = nb::none(), const std::string& combine = "add") {
    const TensorArg x(x_obj, "x"), w(w_obj, "w"), out(out_obj, "out");
    const LinearOperands o = linear_operands(x, w, out, optional_tensor(bias_obj, "bias"), true,
                                             gemm ? std::numeric_limits<int64_t>::max() : kMaxRows, "bf16_gemv");
    Bf16GemvArgs a;
    a.m = o.m, a.n = o.n, a.k = o.k, a.x_stride = o.x_stride, a.bias = o.bias;
    a.x = static_cast<const uint16_t*>(x.data());
    a.w = static_cast<const uint16_t*>(w.data());
    a.y = static_cast<uint16_t*>(out.data());
    a.y_stride = a.n;
    a.threads = threads;
    if (side_by_side && *side_by_side != 1 && *side_by_side != 8) fail("side_by_side must be 1 or 8");
    a.rows_side_by_side = side_by_side ? *side_by_side : cpu_features().intel ? 8 : 1;
    a.silu = silu;
    if (const auto operand = optional_tensor(operand_obj, "operand")) {
        if (combine != "add" && combine != "mul") fail("combine must be 'add' or 'mul', got '" + combine + "'");
        a.operand = epilogue_operand(*operand, out, a.m, a.n);
        a.operand_kind = combine == "add" ? 1 : 2;
    }
    if (gemm)
        run(lookup_bf16_gemm(select(max_isa)), "bf16_gemm", a);
    else
        run(lookup_bf16_gemv(select(max_isa)), "bf16_gemv", a);
}

void bf16_gemv(nb::handle x, nb::handle w, nb::handle bias, nb::handle out, const OptStr& max_isa, int threads,
               std::optional<int> side_by_side) {
    bf16_linear(x, w, bias, out, max_isa, threads, false, side_by_side);
}

void bf16_gemm(nb::handle x, nb::handle w, nb::handle bias, nb::handle out, const OptStr& max_isa, int threads,
               bool silu, nb::handle operand, const std::string& combine) {
    bf16_linear(x, w, bias, out, max_isa, threads, true, std::nullopt, silu, operand, combine);
}

}  // namespace

void bind_bf16_gemv(nb::module_& m) {
    m.def("bf16_gemv", &bf16_gemv, "x"_a, "w"_a, "bias"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a,
          "side_by_side"_a = nb::none(),
          "out = x @ w^T + bias for up to 4 rows of bfloat16 x and a bfloat16 [n, k] weight, summed in float32, rounded "
          "to bfloat16 once; side_by_side: weight rows read side by side (8) or one at a time (1), default by CPU "
          "vendor (8 on Intel)");
    m.def("bf16_gemm", &bf16_gemm, "x"_a, "w"_a, "bias"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a,
          "silu"_a = false, "operand"_a.none() = nb::none(), "combine"_a = "add",
          "out = x @ w^T + bias for any number of rows of bfloat16 x and a bfloat16 [n, k] weight (a prompt), summed "
          "in float32 on widened panels of the weight, then silu (silu=True), then + or * operand (combine 'add' / "
          "'mul'; bfloat16, out's shape), rounded to bfloat16 once");
}

}  // namespace ipxc
