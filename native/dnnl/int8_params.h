// Int8Params: the quantization arguments every int8 layer (Conv, Linear) passes to its primitive:
// per-tensor activation scale and zero point, per-output-channel weight scales, and the output's
// scale and zero point when the output is uint8. A zero point costs oneDNN a compensation term,
// so only the ones that are not 0 are set.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <stdexcept>

#include "engine.h"
#include "layer_plan.h"

namespace ipxc_dnnl {

class Int8Params {
  public:
    void init(float x_scale, int32_t x_zero_point, const float* w_scales, int64_t channels, bool u8_output,
              float y_scale, int32_t y_zero_point) {
        if (!w_scales) throw std::invalid_argument("an int8 layer needs per-channel weight scales");
        active_ = true, u8_output_ = u8_output;
        has_x_zero_point_ = x_zero_point != 0, has_y_zero_point_ = y_zero_point != 0;
        x_scale_ = scalar(dnnl::memory::data_type::f32, &x_scale);
        w_scales_ = f32_memory(w_scales, {channels});
        y_scale_ = scalar(dnnl::memory::data_type::f32, &y_scale);
        x_zero_point_ = scalar(dnnl::memory::data_type::s32, &x_zero_point);
        y_zero_point_ = scalar(dnnl::memory::data_type::s32, &y_zero_point);
    }

    // weight_mask: the weights' dimension the per-channel scales run along, as a oneDNN mask.
    void set_masks(dnnl::primitive_attr& attr, int weight_mask) const {
        if (!active_) return;
        attr.set_scales_mask(DNNL_ARG_SRC, 0);
        attr.set_scales_mask(DNNL_ARG_WEIGHTS, weight_mask);
        if (has_x_zero_point_) attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
        if (u8_output_) {
            attr.set_scales_mask(DNNL_ARG_DST, 0);
            if (has_y_zero_point_) attr.set_zero_points_mask(DNNL_ARG_DST, 0);
        }
    }

    void add_args(Args& args) const {
        if (!active_) return;
        args.set(DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, x_scale_);
        args.set(DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, w_scales_);
        if (has_x_zero_point_) args.set(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, x_zero_point_);
        if (u8_output_) {
            args.set(DNNL_ARG_ATTR_SCALES | DNNL_ARG_DST, y_scale_);
            if (has_y_zero_point_) args.set(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, y_zero_point_);
        }
    }

  private:
    bool active_ = false, u8_output_ = false, has_x_zero_point_ = false, has_y_zero_point_ = false;
    dnnl::memory x_scale_, w_scales_, y_scale_, x_zero_point_, y_zero_point_;
};

}  // namespace ipxc_dnnl
