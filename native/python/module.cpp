// ipexconvert._native: Python bindings (nanobind). Compiled for the generic level.
//
// Tensors arrive through DLPack (tensor_arg.h), so the module has no torch dependency at build
// time and one build serves any torch version. Outputs are allocated by the caller and passed
// in. The GIL is released while a kernel runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ipxc/dispatch.h"
#include "ipxc/isa.h"
#include "ipxc/kernels.h"
#include "tensor_arg.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ipxc {
namespace {

using OptStr = std::optional<std::string>;

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

void check_cpu_contiguous(const TensorArg& t) {
    if (!t.on_cpu()) fail(std::string(t.name()) + " is not on the CPU; move it with .cpu() first");
    if (!t.is_contiguous())
        fail(std::string(t.name()) + " " + t.shape_str() + " is not contiguous; call .contiguous() first");
}

// The activation dtype: float32 or bfloat16.
DType activation_dtype(const TensorArg& t) {
    check_cpu_contiguous(t);
    if (t.is_f32()) return DType::f32;
    if (t.is_bf16()) return DType::bf16;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; native kernels take float32 or bfloat16");
}

// A tensor that must match `ref` in dtype and element count (its shape is the caller's business).
void check_like(const TensorArg& t, const TensorArg& ref) {
    check_cpu_contiguous(t);
    if (!(t.dtype() == ref.dtype()))
        fail(std::string(t.name()) + " has dtype " + t.dtype_str() + " but " + ref.name() + " has " + ref.dtype_str());
    if (t.size() != ref.size())
        fail(std::string(t.name()) + " " + t.shape_str() + " does not have as many elements as " + ref.name() + " " +
             ref.shape_str());
}

// An optional float32 vector of n elements (norm weight/bias).
const float* f32_vector(const std::optional<TensorArg>& t, int64_t n) {
    if (!t) return nullptr;
    check_cpu_contiguous(*t);
    if (!t->is_f32()) fail(std::string(t->name()) + " has dtype " + t->dtype_str() + "; it must be float32");
    if (t->size() != n)
        fail(std::string(t->name()) + " " + t->shape_str() + " must have " + std::to_string(n) +
             " elements (the last dim of x)");
    return static_cast<const float*>(t->data());
}

// rows x cols with cols = the last dim.
void rows_cols(const TensorArg& x, int64_t* rows, int64_t* cols) {
    if (x.ndim() == 0) fail(std::string(x.name()) + " must have at least one dim");
    *cols = x.shape(x.ndim() - 1);
    *rows = *cols == 0 ? 0 : x.size() / *cols;
}

Level select(const OptStr& max_isa) { return select_level(max_isa ? max_isa->c_str() : nullptr); }

template <class Fn, class Args>
void run(Fn fn, const char* name, const Args& args) {
    if (fn == nullptr) throw std::runtime_error(std::string("native kernel ") + name + " was not built");
    nb::gil_scoped_release release;
    fn(args);
}

std::vector<std::string> names_of(const std::vector<Level>& levels) {
    std::vector<std::string> out;
    for (Level l : levels) out.push_back(level_name(l));
    return out;
}

// ---- kernels -------------------------------------------------------------------------------------

void norm(bool rms, nb::handle x_obj, nb::handle residual_obj, nb::handle weight_obj, nb::handle bias_obj, double eps,
          nb::handle out_obj, nb::handle sum_obj, const OptStr& max_isa, int threads) {
    const TensorArg x(x_obj, "x"), out(out_obj, "out");
    const auto residual = optional_tensor(residual_obj, "residual");
    const auto sum = optional_tensor(sum_obj, "sum_out");
    const auto weight = optional_tensor(weight_obj, "weight");
    const auto bias = optional_tensor(bias_obj, "bias");
    NormArgs a;
    a.dtype = activation_dtype(x);
    rows_cols(x, &a.rows, &a.cols);
    check_like(out, x);
    if (residual) {
        check_like(*residual, x);
        a.residual = residual->data();
    }
    if (sum) {
        if (!residual) fail("sum_out needs a residual");
        check_like(*sum, x);
        a.sum = sum->data();
    }
    a.gamma = f32_vector(weight, a.cols);
    if (rms && bias) fail("rms_norm has no bias");
    a.beta = f32_vector(bias, a.cols);
    a.x = x.data();
    a.y = out.data();
    a.eps = static_cast<float>(eps);
    a.threads = threads;
    if (rms)
        run(lookup_rms_norm(select(max_isa)), "rms_norm", a);
    else
        run(lookup_layer_norm(select(max_isa)), "layer_norm", a);
}

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
        if (!m.on_cpu()) fail("mask is not on the CPU; move it with .cpu() first");
        if (m.is_f32()) a.mask_dtype = DType::f32;
        else if (m.is_bf16()) a.mask_dtype = DType::bf16;
        else fail("mask has dtype " + m.dtype_str() + "; an additive mask must be float32 or bfloat16");
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
    run(lookup_gelu(select(max_isa)), "gelu", a);
}

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

// The level kernel `name` runs at under max_isa (None: IPEXCONVERT_MAX_ISA, else the best).
std::string kernel_level(const std::string& name, const OptStr& max_isa) {
    const std::vector<Level> built = kernel_levels(name.c_str());
    if (built.empty()) fail("no native kernel named '" + name + "'");
    const Level want = select(max_isa);
    Level used = built.front();
    for (Level l : built)
        if (static_cast<int>(l) <= static_cast<int>(want)) used = l;
    return level_name(used);
}

nb::dict cpu_features_dict() {
    const CpuFeatures& f = cpu_features();
    nb::dict d;
    d["avx"] = f.avx; d["avx2"] = f.avx2; d["fma"] = f.fma; d["f16c"] = f.f16c;
    d["avx512f"] = f.avx512f; d["avx512bw"] = f.avx512bw; d["avx512dq"] = f.avx512dq; d["avx512vl"] = f.avx512vl;
    d["avx512_vnni"] = f.avx512_vnni; d["avx512_bf16"] = f.avx512_bf16;
    d["amx_tile"] = f.amx_tile; d["amx_bf16"] = f.amx_bf16; d["amx_int8"] = f.amx_int8;
    d["xcr0"] = f.xcr0; d["os_ymm"] = f.os_ymm; d["os_zmm"] = f.os_zmm; d["os_tiles"] = f.os_tiles;
    d["amx_permission"] = f.amx_permission;
    return d;
}

}  // namespace
}  // namespace ipxc

NB_MODULE(_native, m) {
    using namespace ipxc;
    m.doc() = "ipexconvert native kernels with ISA dispatch; use ipexconvert.native, which wraps these for torch";

    m.def("levels", [] {
        std::vector<std::string> out;
        for (int i = 0; i < kNumLevels; ++i) out.push_back(level_name(static_cast<Level>(i)));
        return out;
    }, "All ISA levels, lowest first.");
    m.def("supported_levels", [] { return names_of(supported_levels()); },
          "The levels this CPU and OS can run (CPUID + XCR0 + AMX permission), lowest first.");
    m.def("selected_level", [](const OptStr& max_isa) { return std::string(level_name(select(max_isa))); },
          "max_isa"_a = nb::none(), "min(best supported, max_isa or else IPEXCONVERT_MAX_ISA).");
    m.def("cpu_features", &cpu_features_dict, "CPUID/XCR0 feature bits and the AMX permission.");
    m.def("kernel_names", [] {
        std::vector<std::string> out;
        for (const char* n : kernel_names()) out.push_back(n);
        return out;
    });
    m.def("kernel_levels", [](const std::string& name) { return names_of(kernel_levels(name.c_str())); }, "name"_a,
          "The levels a kernel was compiled for.");
    m.def("kernel_level", &kernel_level, "name"_a, "max_isa"_a = nb::none(),
          "The level kernel `name` runs at under max_isa.");

    // Kernels: out (and sum_out) are preallocated like x; optional tensors may be None.
    m.def("layer_norm",
          [](nb::handle x, nb::handle residual, nb::handle weight, nb::handle bias, double eps, nb::handle out,
             nb::handle sum_out, const OptStr& max_isa, int threads) {
              norm(false, x, residual, weight, bias, eps, out, sum_out, max_isa, threads);
          },
          "x"_a, "residual"_a.none(), "weight"_a.none(), "bias"_a.none(), "eps"_a, "out"_a, "sum_out"_a.none(),
          "max_isa"_a.none(), "threads"_a);
    m.def("rms_norm",
          [](nb::handle x, nb::handle residual, nb::handle weight, double eps, nb::handle out, nb::handle sum_out,
             const OptStr& max_isa, int threads) {
              norm(true, x, residual, weight, nb::none(), eps, out, sum_out, max_isa, threads);
          },
          "x"_a, "residual"_a.none(), "weight"_a.none(), "eps"_a, "out"_a, "sum_out"_a.none(), "max_isa"_a.none(),
          "threads"_a);
    m.def("softmax", &softmax, "x"_a, "scale"_a, "mask"_a.none(), "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("gelu", &gelu, "x"_a, "tanh"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu", &silu, "x"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("silu_mul", &silu_mul, "a"_a, "b"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}
