// Conv on oneDNN primitives kept per input size (see conv.h).
#include "conv.h"

#include "engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace ipxc_dnnl {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

bool is_pointwise(const ConvConfig& c) {
    return c.kernel_h == 1 && c.kernel_w == 1 && c.stride[0] == 1 && c.stride[1] == 1 && c.padding[0] == 0 &&
           c.padding[1] == 0;
}

// Whether the conv runs as a matmul: [n*oh*ow, kh*kw*in] x [kh*kw*in, out]. A 1x1, stride-1,
// unpadded conv reads the NHWC input as those rows; any other is lowered through im2col rows
// (uint8 only). oneDNN's convolutions block each image's output pixels on their own, which leaves
// AMX tiles partly empty when an image has few of them; the matmul runs all rows as one M.
// Measured (benchmarks/conv_as_matmul.py, whole-model A/Bs; 2 threads, same process, bit-identical):
// ResNet-50's int8 1x1 layers at 7x7 output and batch 16 take 0.32-0.73 of the time alone, its
// 3x3 stride-2 512-channel layer 0.43-0.75 with the im2col, the whole model 0.94-0.99; at batch 1
// the 1x1 layers alone were even to 0.84 but the whole model took 1.013 (twice); 3x3 stride-1
// layers and 14x14 or 56x56 outputs: even or slower. bf16 went either way by shape, fp32 was
// even. Hence auto: int8, 1x1 stride 1 or 3x3 stride 2, fewer than 64 output pixels per image,
// at least 256 rows.
bool as_matmul(const ConvConfig& c, int64_t n, int64_t oh, int64_t ow) {
    const bool pointwise = is_pointwise(c), int8 = c.src == dt::u8;
    switch (c.lowering) {
        case ConvConfig::Lowering::kMatmul: return pointwise || int8;
        case ConvConfig::Lowering::kConvolution: return false;
        default: {
            const bool strided_3x3 = c.kernel_h == 3 && c.kernel_w == 3 && c.stride[0] == 2 && c.stride[1] == 2;
            return int8 && (pointwise || strided_3x3) && oh * ow < 64 && n * oh * ow >= 256;
        }
    }
}

// The im2col rows of an NHWC uint8 input: row (b, y, x) holds the kh x kw x in window of output
// pixel (y, x), pixels outside the image reading `pad` (the input zero point: a real 0).
void im2col(const uint8_t* src, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const ConvConfig& c,
            uint8_t pad, uint8_t* rows) {
    const int64_t in = c.in_channels, row_size = c.kernel_h * c.kernel_w * in, count = n * oh * ow;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < count; ++r) {
        const int64_t b = r / (oh * ow), y = r / ow % oh, x = r % ow;
        uint8_t* out = rows + r * row_size;
        for (int64_t i = 0; i < c.kernel_h; ++i) {
            const int64_t iy = y * c.stride[0] - c.padding[0] + i * c.dilation[0];
            for (int64_t j = 0; j < c.kernel_w; ++j, out += in) {
                const int64_t ix = x * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                    std::memset(out, pad, in);
                else
                    std::memcpy(out, src + ((b * h + iy) * w + ix) * in, in);
            }
        }
    }
}

// Everything in the config a primitive, the im2col rows or a run's size arithmetic relies on.
void validate(const ConvConfig& c) {
    check_range(c.in_channels, 1, "in_channels");
    check_range(c.out_channels, 1, "out_channels");
    check_window(c.kernel_h, c.stride[0], c.padding[0], c.dilation[0], "(height)");
    check_window(c.kernel_w, c.stride[1], c.padding[1], c.dilation[1], "(width)");
    check_types(c.src, c.dst);
    // oneDNN reads the residual as sum_type (undef: the output's); another size would misread it.
    if (c.sum_type != dt::undef && c.sum_type != c.dst)
        invalid(std::string("sum_type ") + type_name(c.sum_type) + " is not the output's type " + type_name(c.dst));
    if (!std::isfinite(c.sum_scale)) invalid("sum_scale must be finite");
    if (c.sum && c.dst == dt::u8 && (c.sum_zero_point < 0 || c.sum_zero_point > 255))
        invalid("sum_zero_point " + std::to_string(c.sum_zero_point) + " is outside uint8's range");
    if (c.src == dt::u8) check_quantization(c.x_scale, c.x_zero_point, c.dst == dt::u8, c.y_scale, c.y_zero_point);
    // The weights' element count (and the im2col row width) in 64 bits.
    checked_mul(checked_mul(checked_mul(c.out_channels, c.in_channels, "the weight size"), c.kernel_h, "the weight size"),
                c.kernel_w, "the weight size");
}

}  // namespace

Conv::Conv(const ConvConfig& config, const void* weight, size_t weight_bytes, const float* w_scales,
           const float* bias)
    : config_(config) {
    validate(config);
    const bool int8 = config.src == dt::u8;
    if (int8 && !w_scales) invalid("an int8 layer needs per-channel weight scales");
    if (!int8 && w_scales) invalid("w_scales are for int8 layers only");
    const dt weight_type = int8 ? dt::s8 : config.src;
    const dnnl::memory::dims wdims{config.out_channels, config.in_channels, config.kernel_h, config.kernel_w};
    weights_.init({wdims, weight_type, tag::oihw}, weight, weight_bytes);
    if (bias) {
        bias_ = f32_memory(bias, {config.out_channels});
        // The same values as the matmul's [1, out] bias row.
        bias_row_ = dnnl::memory({{1, config.out_channels}, dt::f32, tag::ab}, cpu_engine(), bias_.get_data_handle());
    }
    if (int8)
        int8_.init(config.x_scale, config.x_zero_point, w_scales, config.out_channels, config.dst == dt::u8,
                   config.y_scale, config.y_zero_point);
}

std::pair<int64_t, int64_t> Conv::output_size(int64_t h, int64_t w) const {
    const ConvConfig& c = config_;
    return {out_size(h, c.kernel_h, c.stride[0], c.padding[0], c.dilation[0]),
            out_size(w, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1])};
}

std::shared_ptr<LayerPlan> Conv::plan_for(int64_t n, int64_t h, int64_t w) {
    check_range(n, 1, "the batch size");
    output_size(h, w);  // h and w in range, and large enough for the kernel
    return plans_.get({n, 0, h, w}, [&] { return make_plan(n, h, w); });
}

Conv::SideBySide Conv::side_by_side(int64_t n, int64_t w) const {
    const ConvConfig& c = config_;
    const int64_t ow = out_size(w, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1]);
    const int64_t reach = (c.kernel_w - 1) * c.dilation[1];
    // an image's outputs read columns [-padding, stride * (ow - 1) - padding + reach] of it
    const int64_t past_right = c.stride[1] * (ow - 1) - c.padding[1] + reach - (w - 1);
    int64_t gap = std::max<int64_t>(c.padding[1], std::max<int64_t>(past_right, 0));
    while ((w + gap) % c.stride[1] != 0) ++gap;
    SideBySide s{gap, w + gap, (w + gap) / c.stride[1], 0, 0};
    s.width = checked_mul(n, s.period, "the side-by-side width");
    s.out_width = out_size(s.width, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1]);
    return s;
}

bool Conv::folds(int64_t fold, int64_t h) const {
    if (fold < 1) return false;
    if (fold == 1) return true;
    const int64_t oh = out_size(h, config_.kernel_h, config_.stride[0], config_.padding[0], config_.dilation[0]);
    return stacks(h) && oh % fold == 0;
}

bool Conv::stacks(int64_t h) const {
    const ConvConfig& c = config_;
    if (c.kernel_h != 1 || c.kernel_w != 1 || c.padding[0] != 0 || c.padding[1] != 0) return false;
    return c.stride[0] * out_size(h, c.kernel_h, c.stride[0], c.padding[0], c.dilation[0]) == h;
}

dnnl::primitive_attr Conv::attributes(int weight_mask) const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    int8_.set_masks(attr, weight_mask);
    dnnl::post_ops post_ops;
    if (config_.sum) post_ops.append_sum(config_.sum_scale, config_.sum_zero_point, config_.sum_type);
    if (config_.relu) post_ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post_ops);
    return attr;
}

LayerPlan Conv::make_plan(int64_t n, int64_t h, int64_t w) {
    const ConvConfig& c = config_;
    const auto [oh, ow] = output_size(h, w);
    if (as_matmul(c, n, oh, ow)) return make_matmul_plan(checked_mul(n, oh * ow, "the output pixel count"));
    const dt weight_type = c.src == dt::u8 ? dt::s8 : c.src;
    dnnl::memory::desc src({n, c.in_channels, h, w}, c.src, tag::nhwc);
    dnnl::memory::desc dst({n, c.out_channels, oh, ow}, c.dst, tag::nhwc);
    dnnl::memory::desc weights({c.out_channels, c.in_channels, c.kernel_h, c.kernel_w}, weight_type, tag::any);

    const dnnl::memory::dims strides{c.stride[0], c.stride[1]};
    const dnnl::memory::dims dilates{c.dilation[0] - 1, c.dilation[1] - 1};  // oneDNN counts from 0
    const dnnl::memory::dims pads{c.padding[0], c.padding[1]};
    const dnnl::primitive_attr attr = attributes(1);  // per output channel: the weights' dim 0
    auto pd = bias_
        ? dnnl::convolution_forward::primitive_desc(cpu_engine(), dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, weights,
                                                    bias_.get_desc(), dst, strides, dilates, pads, pads, attr)
        : dnnl::convolution_forward::primitive_desc(cpu_engine(), dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, weights, dst, strides,
                                                    dilates, pads, pads, attr);
    return LayerPlan{dnnl::convolution_forward(pd), weights_.as(pd.weights_desc()), pd.scratchpad_desc(), src, dst,
                pd.impl_info_str()};
}

LayerPlan Conv::make_matmul_plan(int64_t rows) {
    const ConvConfig& c = config_;
    const dt weight_type = c.src == dt::u8 ? dt::s8 : c.src;
    const int64_t depth = c.kernel_h * c.kernel_w * c.in_channels;
    dnnl::memory::desc src({rows, depth}, c.src, tag::ab);
    dnnl::memory::desc dst({rows, c.out_channels}, c.dst, tag::ab);
    dnnl::memory::desc weights({depth, c.out_channels}, weight_type, tag::any);
    const dnnl::primitive_attr attr = attributes(1 << 1);  // per output channel: the matmul's N
    auto pd = bias_ ? dnnl::matmul::primitive_desc(cpu_engine(), src, weights, bias_row_.get_desc(), dst, attr)
                    : dnnl::matmul::primitive_desc(cpu_engine(), src, weights, dst, attr);
    // The matmul's {depth, out} weights are OHWI ([out][kh][kw][in], the im2col order) in the "ba"
    // layout; for a 1x1 conv OIHW already is.
    const dnnl::memory::desc flat({depth, c.out_channels}, weight_type, tag::ba);
    const bool pointwise = is_pointwise(c);
    auto as_flat = [&](dnnl::memory oihw) {
        if (pointwise) return dnnl::memory(flat, cpu_engine(), oihw.get_data_handle());
        dnnl::memory ohwi(flat, cpu_engine());
        dnnl::memory view({{c.out_channels, c.in_channels, c.kernel_h, c.kernel_w}, weight_type, tag::ohwi},
                          cpu_engine(), ohwi.get_data_handle());
        dnnl::reorder(oihw, view).execute(thread_stream(), oihw, view);
        return ohwi;
    };
    LayerPlan plan{dnnl::matmul(pd), weights_.as(pd.weights_desc(), as_flat), pd.scratchpad_desc(), src, dst,
                   pd.impl_info_str()};
    plan.im2col = !pointwise;
    return plan;
}

void Conv::run(const void* src, int64_t n, int64_t c_in, int64_t h, int64_t w, void* dst, int64_t c_out, int64_t oh,
               int64_t ow, int64_t fold, bool side_by_side, bool stack) {
    const ConvConfig& c = config_;
    if (c_in != c.in_channels || c_out != c.out_channels)
        invalid("the convolution takes " + std::to_string(c.in_channels) + " channels to " +
                std::to_string(c.out_channels) + ", not " + std::to_string(c_in) + " to " + std::to_string(c_out));
    if (output_size(h, w) != std::make_pair(oh, ow)) invalid("output size does not match the convolution");
    if (!folds(fold, h)) invalid("this layer cannot run " + std::to_string(h) + " rows folded " + std::to_string(fold) + " ways");
    if (side_by_side + stack + (fold != 1) > 1) invalid("fold, side by side and stack are different ways: one at a time");
    if (side_by_side) {
        if (n < 2) invalid("side by side takes 2 images or more, not " + std::to_string(n));
        return run_side_by_side(src, n, h, w, dst, oh, ow);
    }
    if (stack) {  // the same bytes as one image of n * h rows (stacks())
        if (!stacks(h)) invalid("this layer cannot stack images of " + std::to_string(h) + " rows");
        h = checked_mul(n, h, "the stacked rows"), oh = n * oh, n = 1;
    }
    if (fold > 1) {  // the same bytes as fold times the images of h / fold rows each (folds())
        n = checked_mul(n, fold, "the folded batch");
        h /= fold, oh /= fold;
    }
    const std::shared_ptr<LayerPlan> held = plan_for(n, h, w);
    const LayerPlan& plan = *held;
    if (plan.im2col) {
        const int64_t rows = checked_mul(n, oh * ow, "the output pixel count");
        const int64_t depth = c.kernel_h * c.kernel_w * c.in_channels;  // checked in validate()
        auto* cols = static_cast<uint8_t*>(
            thread_buffer(ThreadBuffer::kIm2col, static_cast<size_t>(checked_mul(rows, depth, "the im2col rows"))));
        im2col(static_cast<const uint8_t*>(src), n, h, w, oh, ow, c, static_cast<uint8_t>(c.x_zero_point), cols);
        src = cols;
    }
    Args args = plan_args(plan, src, dst);
    if (bias_) args.set(DNNL_ARG_BIAS, plan.src.get_ndims() == 2 ? bias_row_ : bias_);  // matmul or conv
    int8_.add_args(args);
    execute(plan, args);
}

void Conv::run_side_by_side(const void* src, int64_t n, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow) {
    const ConvConfig& c = config_;
    const SideBySide s = side_by_side(n, w);
    if (s.out_width < (n - 1) * s.out_period + ow) invalid("side by side: the packed output is too narrow");  // never
    const size_t in_pixel = static_cast<size_t>(c.in_channels) * element_size(c.src);
    const size_t out_pixel = static_cast<size_t>(c.out_channels) * element_size(c.dst);
    const int64_t in_bytes = checked_mul(checked_mul(h, s.width, "the side-by-side input"),
                                         static_cast<int64_t>(in_pixel), "the side-by-side input");
    const int64_t out_bytes = checked_mul(checked_mul(oh, s.out_width, "the side-by-side output"),
                                          static_cast<int64_t>(out_pixel), "the side-by-side output");
    auto* packed_in = static_cast<uint8_t*>(thread_buffer(ThreadBuffer::kSideBySideIn, static_cast<size_t>(in_bytes)));
    auto* packed_out =
        static_cast<uint8_t*>(thread_buffer(ThreadBuffer::kSideBySideOut, static_cast<size_t>(out_bytes)));
    const auto* in = static_cast<const uint8_t*>(src);
    auto* out = static_cast<uint8_t*>(dst);
    // the gaps read as 0: uint8's zero point, the float types' all-zero bytes (as im2col's padding)
    const uint8_t zero = c.src == dt::u8 ? static_cast<uint8_t>(c.x_zero_point) : 0;
    const size_t gap_bytes = static_cast<size_t>(s.gap) * in_pixel, image_bytes = static_cast<size_t>(w) * in_pixel;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < h * n; ++r) {  // (row, image): the image's row, then the gap after it
        const int64_t y = r / n, i = r % n;
        uint8_t* at = packed_in + (static_cast<size_t>(y * s.width + i * s.period)) * in_pixel;
        std::memcpy(at, in + static_cast<size_t>((i * h + y) * w) * in_pixel, image_bytes);
        std::memset(at + image_bytes, zero, gap_bytes);
    }
    const size_t row_bytes = static_cast<size_t>(ow) * out_pixel;
    if (c.sum) {  // the residual oneDNN sums into its output goes where each output pixel lands
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < oh * n; ++r) {
            const int64_t y = r / n, i = r % n;
            std::memcpy(packed_out + static_cast<size_t>(y * s.out_width + i * s.out_period) * out_pixel,
                        out + static_cast<size_t>((i * oh + y) * ow) * out_pixel, row_bytes);
        }
    }
    const std::shared_ptr<LayerPlan> held = plan_for(1, h, s.width);
    Args args = plan_args(*held, packed_in, packed_out);
    if (bias_) args.set(DNNL_ARG_BIAS, held->src.get_ndims() == 2 ? bias_row_ : bias_);
    int8_.add_args(args);
    execute(*held, args);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < oh * n; ++r) {
        const int64_t y = r / n, i = r % n;
        std::memcpy(out + static_cast<size_t>((i * oh + y) * ow) * out_pixel,
                    packed_out + static_cast<size_t>(y * s.out_width + i * s.out_period) * out_pixel, row_bytes);
    }
}

std::string Conv::implementation(int64_t n, int64_t h, int64_t w) { return plan_for(n, h, w)->implementation; }



}  // namespace ipxc_dnnl
