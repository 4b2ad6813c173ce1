// 2-D max pooling on oneDNN primitives kept per input size, NHWC tensors owned by the caller.
// torch's channels-last bfloat16 max_pool2d measured 579 us at ResNet-50's [1, 64, 112, 112]
// (10.2 ms at batch 16); this is the same pooling on oneDNN's jit kernels.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <string>

#include "layer_plan.h"
#include "plan_cache.h"

namespace ipxc_dnnl {

struct PoolConfig {
    int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
    dnnl::memory::data_type type = dnnl::memory::data_type::f32;  // u8, bf16 or f32, in and out
};

class MaxPool {
  public:
    explicit MaxPool(const PoolConfig& config) : config_(config) {}

    // src: NHWC [n, c, h, w]; dst: NHWC [n, c, oh, ow].
    void run(const void* src, int64_t n, int64_t c, int64_t h, int64_t w, void* dst, int64_t oh, int64_t ow);

  private:
    LayerPlan make_plan(int64_t n, int64_t c, int64_t h, int64_t w);

    PoolConfig config_;
    PlanCache<LayerPlan> plans_;  // per input (n, c, h, w)
};

}  // namespace ipxc_dnnl
