// Conv on oneDNN primitives kept per input size (see conv.h).
#include "conv.h"

#include "engine.h"

#include <cstring>
#include <stdexcept>
#include <unordered_map>

namespace ipxc_dnnl {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

size_t element_size(dt type) {
    switch (type) {
        case dt::u8: case dt::s8: return 1;
        case dt::bf16: return 2;
        case dt::f32: case dt::s32: return 4;
        default: throw std::invalid_argument("unsupported oneDNN data type");
    }
}

dnnl::memory scalar(dt type, const void* value) {
    dnnl::memory m({{1}, type, tag::x}, cpu_engine());
    std::memcpy(m.get_data_handle(), value, element_size(type));
    return m;
}

}  // namespace

Conv::Conv(const ConvConfig& config, const void* weight, const float* w_scales, const float* bias)
    : config_(config), engine_(cpu_engine()) {
    const bool int8 = config.src == dt::u8;
    const dt weight_type = int8 ? dt::s8 : config.src;
    const dnnl::memory::dims wdims{config.out_channels, config.in_channels, config.kernel_h, config.kernel_w};
    plain_weights_ = dnnl::memory({wdims, weight_type, tag::oihw}, engine_);
    std::memcpy(plain_weights_.get_data_handle(), weight, plain_weights_.get_desc().get_size());
    if (bias) {
        bias_ = dnnl::memory({{config.out_channels}, dt::f32, tag::x}, engine_);
        std::memcpy(bias_.get_data_handle(), bias, config.out_channels * sizeof(float));
    }
    if (int8) {
        if (!w_scales) throw std::invalid_argument("an int8 convolution needs per-channel weight scales");
        w_scales_ = dnnl::memory({{config.out_channels}, dt::f32, tag::x}, engine_);
        std::memcpy(w_scales_.get_data_handle(), w_scales, config.out_channels * sizeof(float));
        x_scale_ = scalar(dt::f32, &config.x_scale);
        y_scale_ = scalar(dt::f32, &config.y_scale);
        x_zero_point_ = scalar(dt::s32, &config.x_zero_point);
        y_zero_point_ = scalar(dt::s32, &config.y_zero_point);
    }
}

dnnl::memory Conv::packed_weights(const dnnl::memory::desc& want) {
    std::lock_guard<std::mutex> lock(packed_mutex_);
    for (auto& [desc, memory] : packed_)
        if (desc == want) return memory;
    dnnl::memory packed(want, engine_);
    // A reorder into a layout that carries int8 compensation also computes it.
    dnnl::reorder(plain_weights_, packed).execute(thread_stream(), plain_weights_, packed);
    thread_stream().wait();
    packed_.emplace_back(want, packed);
    return packed;
}

std::shared_ptr<Conv::Plan> Conv::plan_for(int64_t n, int64_t h, int64_t w) {
    return plans_.get({n, 0, h, w}, [&] { return make_plan(n, h, w); });
}

Conv::Plan Conv::make_plan(int64_t n, int64_t h, int64_t w) {
    const ConvConfig& c = config_;
    const bool int8 = c.src == dt::u8;
    const int64_t oh = out_size(h, c.kernel_h, c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t ow = out_size(w, c.kernel_w, c.stride[1], c.padding[1], c.dilation[1]);
    dnnl::memory::desc src({n, c.in_channels, h, w}, c.src, tag::nhwc);
    dnnl::memory::desc dst({n, c.out_channels, oh, ow}, c.dst, tag::nhwc);
    dnnl::memory::desc weights({c.out_channels, c.in_channels, c.kernel_h, c.kernel_w}, int8 ? dt::s8 : c.src, tag::any);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (int8) {
        attr.set_scales_mask(DNNL_ARG_SRC, 0);
        attr.set_scales_mask(DNNL_ARG_WEIGHTS, 1);  // one scale per output channel
        // A zero point costs oneDNN a compensation term: only set the ones that are not 0.
        if (c.x_zero_point != 0) attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
        if (c.dst == dt::u8) {
            attr.set_scales_mask(DNNL_ARG_DST, 0);
            if (c.y_zero_point != 0) attr.set_zero_points_mask(DNNL_ARG_DST, 0);
        }
    }
    dnnl::post_ops post_ops;
    if (c.sum) post_ops.append_sum(c.sum_scale, c.sum_zero_point, c.sum_type);
    if (c.relu) post_ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post_ops);

    const dnnl::memory::dims strides{c.stride[0], c.stride[1]};
    const dnnl::memory::dims dilates{c.dilation[0] - 1, c.dilation[1] - 1};  // oneDNN counts from 0
    const dnnl::memory::dims pads{c.padding[0], c.padding[1]};
    auto pd = bias_
        ? dnnl::convolution_forward::primitive_desc(engine_, dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, weights,
                                                    bias_.get_desc(), dst, strides, dilates, pads, pads, attr)
        : dnnl::convolution_forward::primitive_desc(engine_, dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src, weights, dst, strides,
                                                    dilates, pads, pads, attr);
    return Plan{dnnl::convolution_forward(pd), packed_weights(pd.weights_desc()), pd.scratchpad_desc(), src, dst,
                pd.impl_info_str()};
}

void Conv::run(const void* src, int64_t n, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow) {
    const std::shared_ptr<Plan> held = plan_for(n, h, w);
    const Plan& plan = *held;
    if (plan.dst.get_dims()[2] != oh || plan.dst.get_dims()[3] != ow)
        throw std::invalid_argument("output size does not match the convolution");
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(plan.src, engine_, const_cast<void*>(src))},
        {DNNL_ARG_WEIGHTS, plan.weights},
        {DNNL_ARG_DST, dnnl::memory(plan.dst, engine_, dst)},
        {DNNL_ARG_SCRATCHPAD, dnnl::memory(plan.scratchpad, engine_, thread_scratch(plan.scratchpad.get_size()))},
    };
    if (bias_) args[DNNL_ARG_BIAS] = bias_;
    if (config_.src == dt::u8) {
        args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC] = x_scale_;
        args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS] = w_scales_;
        if (config_.x_zero_point != 0) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = x_zero_point_;
        if (config_.dst == dt::u8) {
            args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST] = y_scale_;
            if (config_.y_zero_point != 0) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = y_zero_point_;
        }
    }
    plan.primitive.execute(thread_stream(), args);
    thread_stream().wait();
}

std::string Conv::implementation(int64_t n, int64_t h, int64_t w) { return plan_for(n, h, w)->implementation; }



}  // namespace ipxc_dnnl
