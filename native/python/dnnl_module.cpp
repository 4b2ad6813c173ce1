// ipexconvert._dnnl: bindings of the direct oneDNN layers (native/dnnl/). A module of its own so
// that the main kernel library loads even where oneDNN is missing. Tensors arrive through
// DLPack (tensor_arg.h); the GIL is released while a primitive runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "../dnnl/conv.h"
#include "../dnnl/engine.h"
#include "../dnnl/linear.h"
#include "../dnnl/pool.h"
#include "ipxc/native_call.h"
#include "tensor_arg.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using ipxc::TensorArg;
using dt = dnnl::memory::data_type;
using Pair = std::tuple<int64_t, int64_t>;

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

// A type name from Python; "" (undef) only where `optional` (sum_type: the output's).
dt data_type(const std::string& name, const char* what, bool optional = false) {
    if (name == "uint8") return dt::u8;
    if (name == "bfloat16") return dt::bf16;
    if (name == "float32") return dt::f32;
    if (name.empty() && optional) return dt::undef;
    fail(std::string(what) + ": unsupported data type '" + name + "' (uint8, bfloat16 or float32)");
}

// The oneDNN type of a tensor's dtype (undef for one the layers never take).
dt tensor_type(const TensorArg& t) {
    const nb::dlpack::dtype d = t.dtype();
    if (d == nb::dtype<uint8_t>()) return dt::u8;
    if (d == nb::dtype<int8_t>()) return dt::s8;
    if (d == nb::dtype<float>()) return dt::f32;
    if (t.is_bf16()) return dt::bf16;
    return dt::undef;
}

// The buffer holds elements of the type the primitive reads or writes (another size would make
// it read or write past the buffer).
void check_type(const TensorArg& t, dt want) {
    if (tensor_type(t) != want)
        fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; this layer takes " + ipxc_dnnl::type_name(want));
}

void check_cpu_contiguous(const TensorArg& t) {
    if (!t.on_cpu() || !t.is_contiguous()) fail(std::string(t.name()) + " must be a contiguous CPU tensor");
}

// [n, c, h, w] in dense channels-last memory order (NHWC), as the primitives read and write it:
// every element at its own place, none overlapping (a dim of size 1 may have any stride; an empty
// tensor any strides: the layers refuse a zero size or run nothing).
void check_nhwc(const TensorArg& t) {
    if (!t.on_cpu() || t.ndim() != 4) fail(std::string(t.name()) + " " + t.shape_str() + " must be a 4-D CPU tensor");
    if (t.size() == 0) return;
    const int64_t c = t.shape(1), h = t.shape(2), w = t.shape(3);
    const int64_t wc = ipxc_dnnl::checked_mul(w, c, "the tensor size");
    const int64_t hwc = ipxc_dnnl::checked_mul(h, wc, "the tensor size");
    const bool nhwc = (c == 1 || t.stride(1) == 1) && (w == 1 || t.stride(3) == c) && (h == 1 || t.stride(2) == wc) &&
                      (t.shape(0) == 1 || t.stride(0) == hwc);
    if (!nhwc) fail(std::string(t.name()) + " " + t.shape_str() + " must be channels-last (torch.channels_last)");
}

// Our post-op names (ir/postops.py) -> oneDNN eltwise algorithm and its alpha.
std::pair<dnnl::algorithm, float> eltwise(const std::string& name) {
    static const std::map<std::string, std::pair<dnnl::algorithm, float>> algorithms{
        {"", {dnnl::algorithm::undef, 0.f}},
        {"relu", {dnnl::algorithm::eltwise_relu, 0.f}},
        {"gelu", {dnnl::algorithm::eltwise_gelu_erf, 0.f}},
        {"gelu_tanh", {dnnl::algorithm::eltwise_gelu_tanh, 0.f}},
        {"silu", {dnnl::algorithm::eltwise_swish, 1.f}},
        {"sigmoid", {dnnl::algorithm::eltwise_logistic, 0.f}},
        {"tanh", {dnnl::algorithm::eltwise_tanh, 0.f}},
    };
    auto found = algorithms.find(name);
    if (found == algorithms.end()) fail("unsupported post-op " + name + " (relu, gelu, gelu_tanh, silu, sigmoid, tanh)");
    return found->second;
}

// The weight's dtype goes with the activations: int8 weights for uint8, else the same float type.
void check_weight_dtype(const TensorArg& w, dt src, const std::string& src_name) {
    if (tensor_type(w) != (src == dt::u8 ? dt::s8 : src))
        fail("weight has dtype " + w.dtype_str() + ", which does not go with " + src_name + " activations");
}

// A weight as the layers copy it: a contiguous CPU tensor of `ndim` dims, none empty (its dtype
// is check_weight_dtype's, its byte size the layer's constructor checks against the geometry).
void check_weight(const TensorArg& w, int ndim, const char* layout) {
    check_cpu_contiguous(w);
    if (w.ndim() != ndim) fail("weight " + w.shape_str() + " must be " + layout);
    for (int d = 0; d < ndim; ++d)
        if (w.shape(d) < 1) fail("weight " + w.shape_str() + " has an empty dim; it must be " + layout);
}

// Optional float32 [channels] vectors (w_scales, bias): null when None.
const float* f32_channels(nb::handle value, const char* name, int64_t channels, std::optional<TensorArg>& holder) {
    if (value.is_none()) return nullptr;
    holder.emplace(value, name);
    check_cpu_contiguous(*holder);
    if (!holder->is_f32() || holder->size() != channels)
        fail(std::string(name) + " must be float32 [" + std::to_string(channels) + "]");
    return static_cast<const float*>(holder->data());
}

// What every weighted layer's __init__ ends with, after its own config fields: the int8 fields,
// the weight's dtype check, the optional per-channel vectors, then the layer (which copies them).
template <class Layer, class Config>
void construct(Layer* self, Config& c, const TensorArg& w, const std::string& src, nb::handle w_scales,
               nb::handle bias, int64_t channels, float x_scale, int32_t x_zero_point, float y_scale,
               int32_t y_zero_point) {
    c.x_scale = x_scale, c.x_zero_point = x_zero_point, c.y_scale = y_scale, c.y_zero_point = y_zero_point;
    check_weight_dtype(w, c.src, src);
    std::optional<TensorArg> s, b;
    const float* scales = f32_channels(w_scales, "w_scales", channels, s);
    const float* bias_data = f32_channels(bias, "bias", channels, b);
    const size_t weight_bytes = static_cast<size_t>(w.size()) * ipxc_dnnl::element_size(tensor_type(w));
    new (self) Layer(c, w.data(), weight_bytes, scales, bias_data);
}

void init_conv(ipxc_dnnl::Conv* self, nb::handle weight, nb::handle w_scales, nb::handle bias, Pair stride, Pair padding,
                           Pair dilation, const std::string& src, const std::string& dst, bool relu, bool sum,
                           const std::string& sum_type, float sum_scale, int32_t sum_zero_point, float x_scale,
                           int32_t x_zero_point, float y_scale, int32_t y_zero_point, const std::string& lowering) {
    TensorArg w(weight, "weight");
    check_weight(w, 4, "OIHW [out_channels, in_channels, kernel_h, kernel_w]");
    ipxc_dnnl::ConvConfig c;
    c.out_channels = w.shape(0), c.in_channels = w.shape(1), c.kernel_h = w.shape(2), c.kernel_w = w.shape(3);
    c.stride[0] = std::get<0>(stride), c.stride[1] = std::get<1>(stride);
    c.padding[0] = std::get<0>(padding), c.padding[1] = std::get<1>(padding);
    c.dilation[0] = std::get<0>(dilation), c.dilation[1] = std::get<1>(dilation);
    c.src = data_type(src, "src"), c.dst = data_type(dst, "dst");
    c.relu = relu, c.sum = sum, c.sum_type = data_type(sum_type, "sum_type", true), c.sum_scale = sum_scale;
    c.sum_zero_point = sum_zero_point;
    using L = ipxc_dnnl::ConvConfig::Lowering;
    if (lowering == "auto") c.lowering = L::kAuto;
    else if (lowering == "matmul") c.lowering = L::kMatmul;
    else if (lowering == "convolution") c.lowering = L::kConvolution;
    else fail("lowering must be 'auto', 'matmul' or 'convolution', not '" + lowering + "'");
    construct(self, c, w, src, w_scales, bias, c.out_channels, x_scale, x_zero_point, y_scale, y_zero_point);
}

// "[a, b, c, d]"
std::string dims_str(int64_t a, int64_t b, int64_t c, int64_t d) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + ", " + std::to_string(d) + "]";
}

// x and out (which holds the residual with a sum) dense NHWC, of the layer's types, channels and
// sizes: exactly the memory the primitive reads and writes. Conv::run checks fold / side_by_side / stack.
std::function<void()> prepare_conv(ipxc_dnnl::Conv& conv, nb::handle x, nb::handle out, int64_t fold, bool side_by_side,
                                   bool stack) {
    const ipxc_dnnl::ConvConfig& c = conv.config();
    TensorArg src(x, "x"), dst(out, "out");
    check_nhwc(src);
    check_nhwc(dst);
    check_type(src, c.src);
    check_type(dst, c.dst);
    const int64_t n = src.shape(0), h = src.shape(2), w = src.shape(3);
    if (src.shape(1) != c.in_channels)
        fail("x " + src.shape_str() + " has " + std::to_string(src.shape(1)) + " channels; this layer takes " +
             std::to_string(c.in_channels));
    const auto [oh, ow] = conv.output_size(h, w);
    if (dst.shape(0) != n || dst.shape(1) != c.out_channels || dst.shape(2) != oh || dst.shape(3) != ow)
        fail("out " + dst.shape_str() + " must be " + dims_str(n, c.out_channels, oh, ow) +
             ", this layer's output size and channels for x " + src.shape_str() +
             (c.sum ? " (out holds the residual summed into it)" : ""));
    if (n == 0) return [] {};  // no images: nothing to read or write
    const void* src_data = src.data();
    void* dst_data = dst.data();
    const int64_t in_channels = c.in_channels, out_channels = c.out_channels;
    return [&conv, src_data, n, in_channels, h, w, dst_data, out_channels, oh = oh, ow = ow, fold, side_by_side, stack] {
        conv.run(src_data, n, in_channels, h, w, dst_data, out_channels, oh, ow, fold, side_by_side, stack);
    };
}

void init_linear(ipxc_dnnl::Linear* self, nb::handle weight, nb::handle w_scales, nb::handle bias,
                 const std::string& src, const std::string& dst, const std::string& post_op, nb::handle multiplier,
                 float x_scale, int32_t x_zero_point, float y_scale, int32_t y_zero_point) {
    TensorArg w(weight, "weight");
    check_weight(w, 2, "[out_features, in_features]");
    ipxc_dnnl::LinearConfig c;
    c.out_features = w.shape(0), c.in_features = w.shape(1);
    c.src = data_type(src, "src"), c.dst = data_type(dst, "dst");
    std::tie(c.eltwise, c.eltwise_alpha) = eltwise(post_op);
    std::optional<TensorArg> m;
    if (const float* factors = f32_channels(multiplier, "multiplier", c.out_features, m))
        c.multiplier.assign(factors, factors + c.out_features);
    construct(self, c, w, src, w_scales, bias, c.out_features, x_scale, x_zero_point, y_scale, y_zero_point);
}

// x: [..., in_features], out: [..., out_features], both contiguous with the same leading dims.
std::function<void()> prepare_linear(ipxc_dnnl::Linear& linear, nb::handle x, nb::handle out) {
    TensorArg src(x, "x"), dst(out, "out");
    check_cpu_contiguous(src);
    check_cpu_contiguous(dst);
    check_type(src, linear.config().src);
    check_type(dst, linear.config().dst);
    const int64_t k = linear.in_features(), n = linear.out_features();
    if (src.ndim() < 1 || src.shape(src.ndim() - 1) != k)
        fail("x " + src.shape_str() + " must end in in_features (" + std::to_string(k) + ")");
    bool same_lead = dst.ndim() == src.ndim() && dst.shape(dst.ndim() - 1) == n;
    for (int i = 0; same_lead && i + 1 < src.ndim(); ++i) same_lead = src.shape(i) == dst.shape(i);
    if (!same_lead)
        fail("out " + dst.shape_str() + " must be x's leading dims then out_features (" + std::to_string(n) + ")");
    const int64_t rows = src.size() / k;
    if (rows == 0) return [] {};
    return [&linear, src_data = src.data(), rows, dst_data = dst.data()] { linear.run(src_data, rows, dst_data); };
}

void init_max_pool(ipxc_dnnl::MaxPool* self, Pair kernel, Pair stride, Pair padding, Pair dilation,
                   const std::string& type) {
    ipxc_dnnl::PoolConfig p;
    p.kernel[0] = std::get<0>(kernel), p.kernel[1] = std::get<1>(kernel);
    p.stride[0] = std::get<0>(stride), p.stride[1] = std::get<1>(stride);
    p.padding[0] = std::get<0>(padding), p.padding[1] = std::get<1>(padding);
    p.dilation[0] = std::get<0>(dilation), p.dilation[1] = std::get<1>(dilation);
    p.type = data_type(type, "type");
    new (self) ipxc_dnnl::MaxPool(p);
}

// x and out dense NHWC of the pool's type, out [n, c, oh, ow] for x [n, c, h, w].
std::function<void()> prepare_max_pool(ipxc_dnnl::MaxPool& pool, nb::handle x, nb::handle out) {
    TensorArg src(x, "x"), dst(out, "out");
    check_nhwc(src);
    check_nhwc(dst);
    check_type(src, pool.config().type);
    check_type(dst, pool.config().type);
    const int64_t n = src.shape(0), c = src.shape(1), h = src.shape(2), w = src.shape(3);
    const auto [oh, ow] = pool.output_size(h, w);
    if (dst.shape(0) != n || dst.shape(1) != c || dst.shape(2) != oh || dst.shape(3) != ow)
        fail("out " + dst.shape_str() + " must be " + dims_str(n, c, oh, ow) + ", this pooling's output size for x " +
             src.shape_str());
    if (n == 0 || c == 0) return [] {};  // nothing to read or write
    return [&pool, src_data = src.data(), n, c, h, w, dst_data = dst.data(), oh = oh, ow = ow] {
        pool.run(src_data, n, c, h, w, dst_data, oh, ow);
    };
}

void released(const std::function<void()>& call) {
    nb::gil_scoped_release release;
    call();
}

// A layer's call with its arguments checked once (Conv.bind and the like): the bound plans of
// ipexconvert/runtime/bound_plan.py call it, or hand it to ipexconvert._native's capture() through
// `native_call`, which then makes it with no Python between it and the kernels around it. It keeps the layer and
// the tensors it was given alive; their shapes and storage must not change while it is used (the plan owns them).
class BoundCall {
public:
    BoundCall(std::function<void()> call, nb::object keep) : call_(std::move(call)), keep_(std::move(keep)) {
        native_.run = &BoundCall::run_native;
        native_.context = this;
    }
    void operator()() const { released(call_); }
    nb::capsule native_call() const { return nb::capsule(&native_, IPXC_NATIVE_CALL_CAPSULE); }

private:
    static const char* run_native(void* context) {
        thread_local std::string error;
        try {
            static_cast<BoundCall*>(context)->call_();
            return nullptr;
        } catch (const std::exception& e) {
            error = e.what();
            return error.c_str();
        }
    }
    std::function<void()> call_;
    nb::object keep_;  // (the layer, x, out)
    IpxcNativeCall native_{};
};

BoundCall* bound(std::function<void()> call, nb::handle layer, nb::handle x, nb::handle out) {
    return new BoundCall(std::move(call), nb::make_tuple(layer, x, out));
}

// oneDNN's own refusals (a primitive it cannot make for these arguments) as ValueError, running
// out of memory as MemoryError; anything else stays a RuntimeError.
void translate_dnnl_error(const std::exception_ptr& error, void*) {
    try {
        std::rethrow_exception(error);
    } catch (const dnnl::error& e) {
        PyObject* type = e.status == dnnl_out_of_memory ? PyExc_MemoryError
                         : (e.status == dnnl_invalid_arguments || e.status == dnnl_unimplemented) ? PyExc_ValueError
                                                                                                  : PyExc_RuntimeError;
        PyErr_SetString(type, (std::string("oneDNN: ") + e.what()).c_str());
    }
}

}  // namespace

NB_MODULE(_dnnl, m) {
    m.doc() = "ipexconvert's direct oneDNN layers (see native/dnnl/conv.h)";
    nb::register_exception_translator(&translate_dnnl_error);
    nb::class_<BoundCall>(m, "BoundCall",
                          "A layer call checked once: calling it makes it; native_call hands it to _native.capture().")
        .def("__call__", &BoundCall::operator())
        .def_prop_ro("native_call", &BoundCall::native_call);
    nb::class_<ipxc_dnnl::Conv>(m, "Conv")
        .def("__init__", &init_conv,
             "weight"_a, "w_scales"_a.none(), "bias"_a.none(), "stride"_a, "padding"_a, "dilation"_a, "src"_a,
             "dst"_a, "relu"_a = false, "sum"_a = false, "sum_type"_a = "", "sum_scale"_a = 1.f,
             "sum_zero_point"_a = 0, "x_scale"_a = 1.f, "x_zero_point"_a = 0, "y_scale"_a = 1.f,
             "y_zero_point"_a = 0, "lowering"_a = "auto")
        .def("run",
             [](ipxc_dnnl::Conv& conv, nb::handle x, nb::handle out, int64_t fold, bool side_by_side, bool stack) {
                 released(prepare_conv(conv, x, out, fold, side_by_side, stack));
             },
             "x"_a, "out"_a, "fold"_a = 1, "side_by_side"_a = false, "stack"_a = false,
             "out = conv(x) (+ the residual already in out), x and out channels-last; fold: each image's rows run "
             "as that many images (see folds); side_by_side: the batch's images (2 or more) run as one image, "
             "side by side with zero columns between them; stack: the batch's images run as one image of their "
             "rows one after the other (see stacks); one of the three at most (conv.h)")
        .def("bind",
             [](nb::handle self, nb::handle x, nb::handle out, int64_t fold, bool side_by_side, bool stack) {
                 return bound(prepare_conv(nb::cast<ipxc_dnnl::Conv&>(self), x, out, fold, side_by_side, stack), self, x,
                              out);
             },
             "x"_a, "out"_a, "fold"_a = 1, "side_by_side"_a = false, "stack"_a = false, nb::rv_policy::take_ownership,
             "run()'s call checked once and kept (a BoundCall), for x and out whose shapes and storage stay as they are")
        .def("stacks", &ipxc_dnnl::Conv::stacks, "h"_a,
             "whether run(stack=True) can take images of h rows: a 1x1 layer without padding whose input rows are "
             "stride x output rows (conv.h)")
        .def("folds", &ipxc_dnnl::Conv::folds, "fold"_a, "h"_a,
             "whether run(fold=) can take an input of h rows: a 1x1 layer without padding whose output rows the "
             "fold divides and whose input rows are stride x output rows (conv.h)")
        .def("implementation", &ipxc_dnnl::Conv::implementation, "n"_a, "h"_a, "w"_a)
        .def("plan_count", &ipxc_dnnl::Conv::plan_count);
    nb::class_<ipxc_dnnl::Linear>(m, "Linear")
        .def("__init__", &init_linear, "weight"_a, "w_scales"_a.none(), "bias"_a.none(), "src"_a, "dst"_a,
             "post_op"_a = "", "multiplier"_a.none() = nb::none(), "x_scale"_a = 1.f, "x_zero_point"_a = 0,
             "y_scale"_a = 1.f, "y_zero_point"_a = 0)
        .def("run", [](ipxc_dnnl::Linear& linear, nb::handle x, nb::handle out) { released(prepare_linear(linear, x, out)); },
             "x"_a, "out"_a, "out = post_op(x @ weight^T + bias) * multiplier, x and out contiguous")
        .def("bind",
             [](nb::handle self, nb::handle x, nb::handle out) {
                 return bound(prepare_linear(nb::cast<ipxc_dnnl::Linear&>(self), x, out), self, x, out);
             },
             "x"_a, "out"_a, nb::rv_policy::take_ownership, "run()'s call checked once and kept (a BoundCall)")
        .def_prop_ro("in_features", &ipxc_dnnl::Linear::in_features)
        .def_prop_ro("out_features", &ipxc_dnnl::Linear::out_features)
        .def("implementation", &ipxc_dnnl::Linear::implementation, "rows"_a)
        .def("plan_count", &ipxc_dnnl::Linear::plan_count);
    nb::class_<ipxc_dnnl::MaxPool>(m, "MaxPool")
        .def("__init__", &init_max_pool, "kernel"_a, "stride"_a, "padding"_a, "dilation"_a, "type"_a)
        .def("run", [](ipxc_dnnl::MaxPool& pool, nb::handle x, nb::handle out) { released(prepare_max_pool(pool, x, out)); },
             "x"_a, "out"_a, "out = max_pool2d(x), x and out channels-last")
        .def("bind",
             [](nb::handle self, nb::handle x, nb::handle out) {
                 return bound(prepare_max_pool(nb::cast<ipxc_dnnl::MaxPool&>(self), x, out), self, x, out);
             },
             "x"_a, "out"_a, nb::rv_policy::take_ownership, "run()'s call checked once and kept (a BoundCall)");
    m.def("set_max_isa", &ipxc_dnnl::set_max_isa, "isa"_a);
    m.def("version", [] {
        const dnnl_version_t* v = dnnl_version();
        return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    });
}
