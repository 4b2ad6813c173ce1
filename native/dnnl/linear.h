// A linear layer (y = x W^T + b) run directly on a oneDNN matmul primitive, created once per row
// count and kept.
//
// torch's oneDNN linear operators rebuild their oneDNN objects on every call (about 37 us per
// linear call measured against its oneDNN execution time, docs/native.md); here the primitive,
// the packed weights and the scratchpad live as long as the layer. x is [rows, in_features] and
// the output [rows, out_features], both row-major and owned by the caller.
//
// int8: uint8 activations with a zero point, int8 weights with per-output-feature scales,
// float32 bias, uint8 / bfloat16 / float32 output. Float: bfloat16 or float32 throughout (bias
// float32). One elementwise post-op (relu, gelu, swish, ...) runs on the real-valued result, then
// an optional per-output-feature multiplier (a SmoothQuant factor of the next layer, see
// passes/fold_requantize.py), before an int8 output is quantized.
#pragma once

#include <dnnl.hpp>

#include "int8_params.h"
#include "packed_weights.h"
#include "layer_plan.h"
#include "plan_cache.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ipxc_dnnl {

struct LinearConfig {
    int64_t in_features = 0, out_features = 0;
    dnnl::memory::data_type src = dnnl::memory::data_type::f32;  // u8, bf16 or f32
    dnnl::memory::data_type dst = dnnl::memory::data_type::f32;  // u8, bf16 or f32
    dnnl::algorithm eltwise = dnnl::algorithm::undef;              // undef: none
    float eltwise_alpha = 0.f, eltwise_beta = 0.f;
    std::vector<float> multiplier;  // [out_features] or empty: y[:, n] *= multiplier[n] after the eltwise
    // int8 only (src u8): x_real = x_scale * (x - x_zero_point); y = y_real / y_scale + y_zero_point.
    float x_scale = 1.f, y_scale = 1.f;
    int32_t x_zero_point = 0, y_zero_point = 0;
};

class Linear {
  public:
    // weight: [out_features, in_features] (contiguous, weight_bytes long), int8 (with w_scales,
    // one per output feature) or the src type. bias: float32 [out_features] or null. Both are
    // copied. The config is checked first; a weight of another size than it says is refused.
    Linear(const LinearConfig& config, const void* weight, size_t weight_bytes, const float* w_scales,
           const float* bias);

    // src: [rows, in_features]; dst: [rows, out_features], contiguous, of the config's types (the
    // caller checks the buffers).
    void run(const void* src, int64_t rows, void* dst);

    const LinearConfig& config() const { return config_; }

    // The oneDNN implementation the primitive for this row count uses (e.g. brg:avx512_core_amx).
    std::string implementation(int64_t rows);

    int64_t in_features() const { return config_.in_features; }
    int64_t out_features() const { return config_.out_features; }

    // How many row counts have a primitive now (at most PlanCache::kMaxPlans).
    size_t plan_count() { return plans_.size(); }

  private:
    std::shared_ptr<LayerPlan> plan_for(int64_t rows);
    LayerPlan make_plan(int64_t rows);

    LinearConfig config_;
    PackedWeights weights_;
    dnnl::memory bias_, multiplier_;
    Int8Params int8_;
    PlanCache<LayerPlan> plans_;  // per (rows, 0, 0, 0)
};

}  // namespace ipxc_dnnl
