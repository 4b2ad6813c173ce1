// Linear on a oneDNN matmul primitive kept per row count (see linear.h).
#include "linear.h"

#include "engine.h"

#include <stdexcept>

namespace ipxc_dnnl {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

Linear::Linear(const LinearConfig& config, const void* weight, size_t weight_bytes, const float* w_scales,
               const float* bias)
    : config_(config) {
    check_range(config.in_features, 1, "in_features");
    check_range(config.out_features, 1, "out_features");
    check_types(config.src, config.dst);
    const bool int8 = config.src == dt::u8;
    if (int8) {
        check_quantization(config.x_scale, config.x_zero_point, config.dst == dt::u8, config.y_scale,
                           config.y_zero_point);
        if (!w_scales) invalid("an int8 layer needs per-channel weight scales");
    } else if (w_scales) {
        invalid("w_scales are for int8 layers only");
    }
    checked_mul(config.in_features, config.out_features, "the weight size");
    // W is stored [out, in] row-major: as the matmul's {K, N} weights that is the "ba" layout.
    weights_.init({{config.in_features, config.out_features}, int8 ? dt::s8 : config.src, tag::ba}, weight,
                  weight_bytes);
    if (bias) bias_ = f32_memory(bias, {1, config.out_features});
    if (!config.multiplier.empty()) {
        if (static_cast<int64_t>(config.multiplier.size()) != config.out_features)
            throw std::invalid_argument("the multiplier needs one value per output feature");
        multiplier_ = f32_memory(config.multiplier.data(), {1, config.out_features});
    }
    if (int8)
        int8_.init(config.x_scale, config.x_zero_point, w_scales, config.out_features, config.dst == dt::u8,
                   config.y_scale, config.y_zero_point);
}

std::shared_ptr<LayerPlan> Linear::plan_for(int64_t rows) {
    if (rows < 1) invalid("a linear layer needs at least one row, got " + std::to_string(rows));
    return plans_.get({rows, 0, 0, 0}, [&] { return make_plan(rows); });
}

LayerPlan Linear::make_plan(int64_t rows) {
    const LinearConfig& c = config_;
    const bool int8 = c.src == dt::u8;
    dnnl::memory::desc src({rows, c.in_features}, c.src, tag::ab);
    dnnl::memory::desc dst({rows, c.out_features}, c.dst, tag::ab);
    dnnl::memory::desc weights({c.in_features, c.out_features}, int8 ? dt::s8 : c.src, tag::any);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    int8_.set_masks(attr, 1 << 1);  // per output channel
    dnnl::post_ops post_ops;
    if (c.eltwise != dnnl::algorithm::undef) post_ops.append_eltwise(c.eltwise, c.eltwise_alpha, c.eltwise_beta);
    if (multiplier_) post_ops.append_binary(dnnl::algorithm::binary_mul, multiplier_.get_desc());
    attr.set_post_ops(post_ops);

    auto pd = bias_ ? dnnl::matmul::primitive_desc(cpu_engine(), src, weights, bias_.get_desc(), dst, attr)
                    : dnnl::matmul::primitive_desc(cpu_engine(), src, weights, dst, attr);
    return LayerPlan{dnnl::matmul(pd), weights_.as(pd.weights_desc()), pd.scratchpad_desc(), src, dst,
                pd.impl_info_str()};
}

void Linear::run(const void* src, int64_t rows, void* dst) {
    const std::shared_ptr<LayerPlan> held = plan_for(rows);
    const LayerPlan& plan = *held;
    Args args = plan_args(plan, src, dst);
    if (bias_) args.set(DNNL_ARG_BIAS, bias_);
    if (multiplier_) {
        const int index = config_.eltwise != dnnl::algorithm::undef ? 1 : 0;  // its place in the post-op chain
        args.set(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, multiplier_);
    }
    int8_.add_args(args);
    execute(plan, args);
}

std::string Linear::implementation(int64_t rows) { return plan_for(rows)->implementation; }

}  // namespace ipxc_dnnl
