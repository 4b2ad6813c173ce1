// Python binding of the attention kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

// q, k, v, out: [batch, heads, seq, head_dim] views with a contiguous last dim, all bf16 (the
// `attention` kernel) or all float32 (`attention_f32`). out may instead be int8/uint8, for the
// output quantized (q_scale, q_zero_point, optional q_multipliers of heads * head_dim
// floats; see AttentionArgs).
void attention(nb::handle q_obj, nb::handle k_obj, nb::handle v_obj, nb::handle mask_obj, nb::handle out_obj,
               double scale, const OptStr& max_isa, int threads, double q_scale, int q_zero_point,
               nb::handle q_multipliers_obj) {
    const TensorArg q(q_obj, "q"), k(k_obj, "k"), v(v_obj, "v"), out(out_obj, "out");
    const auto mask = optional_tensor(mask_obj, "mask");
    const auto q_multipliers = optional_tensor(q_multipliers_obj, "q_multipliers");
    const bool f32 = q.is_f32();
    AttentionArgs a;
    a.quantized = is(out, nb::dtype<int8_t>()) || is(out, nb::dtype<uint8_t>());
    for (const TensorArg* t : {&q, &k, &v, &out}) {
        const std::string what = std::string(t->name()) + " " + t->shape_str();
        if (!t->on_cpu()) fail(what + " is not on the CPU; move it with .cpu() first");
        if (t == &out && !a.quantized && (f32 ? !out.is_f32() : !out.is_bf16())) {
            fail("out has dtype " + out.dtype_str() + "; attention writes q's dtype, or int8/uint8 codes");
        } else if (t != &out && (f32 ? !t->is_f32() : !t->is_bf16())) {
            fail(std::string(t->name()) + " has dtype " + t->dtype_str() +
                 "; attention takes bfloat16 or float32 q, k and v, all of one dtype");
        }
        if (t->ndim() != 4) fail(what + " must be 4-D: [batch, heads, seq, head_dim]");
        if (t->stride(3) != 1) fail(what + " needs a contiguous last dim");
    }
    a.batch = q.shape(0), a.heads = q.shape(1), a.q_len = q.shape(2), a.head_dim = q.shape(3), a.kv_len = k.shape(2);
    const int64_t head_multiple = f32 ? 16 : 32;  // one fp32 vector; one bf16 tile row
    if (a.head_dim <= 0 || a.head_dim % head_multiple != 0)
        fail("head_dim " + std::to_string(a.head_dim) + " is not a multiple of " + std::to_string(head_multiple) +
             (f32 ? " (one vector of float32)" : " (what the tiles take)"));
    if (a.kv_len <= 0) fail("k " + k.shape_str() + " has no keys");
    // float32: k and v may have fewer heads than q, a divisor of them (grouped-query attention)
    a.kv_heads = k.shape(1);
    if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0 || (!f32 && a.kv_heads != a.heads))
        fail("k " + k.shape_str() + " has " + std::to_string(a.kv_heads) + " heads for q's " + std::to_string(a.heads) +
             (f32 ? ": they must divide q's" : ": bfloat16 attention needs as many as q"));
    for (const TensorArg* t : {&k, &v})
        if (t->shape(0) != a.batch || t->shape(1) != a.kv_heads || t->shape(2) != a.kv_len || t->shape(3) != a.head_dim)
            fail(std::string(t->name()) + " " + t->shape_str() + " does not match q " + q.shape_str() + " and k " +
                 k.shape_str());
    for (int d = 0; d < 4; ++d)
        if (out.shape(d) != q.shape(d)) fail("out " + out.shape_str() + " must have q's shape " + q.shape_str());
    for (int d = 0; d < 3; ++d) {
        a.q_strides[d] = q.stride(d), a.k_strides[d] = k.stride(d), a.v_strides[d] = v.stride(d);
        a.out_strides[d] = out.stride(d);
    }
    if (mask) {
        const int64_t want[4] = {a.batch, a.heads, a.q_len, a.kv_len};
        a.mask = additive_mask(*mask, want, &a.mask_dtype, a.mask_strides);
    }
    if (q_multipliers && !a.quantized) fail("q_multipliers needs an int8 or uint8 out");
    if (a.quantized) {
        a.q_unsigned = is(out, nb::dtype<uint8_t>());
        if (!(q_scale > 0.0)) fail("q_scale must be positive");
        if (a.q_unsigned ? (q_zero_point < 0 || q_zero_point > 255) : (q_zero_point < -128 || q_zero_point > 127))
            fail("q_zero_point " + std::to_string(q_zero_point) + " is outside out's range");
        if (q_multipliers) {
            check_cpu_contiguous(*q_multipliers);
            if (!q_multipliers->is_f32() || q_multipliers->size() != a.heads * a.head_dim)
                fail("q_multipliers " + q_multipliers->shape_str() + " (" + q_multipliers->dtype_str() +
                     ") must be float32 with heads * head_dim = " + std::to_string(a.heads * a.head_dim) + " elements");
            a.q_multipliers = static_cast<const float*>(q_multipliers->data());
        }
        a.q_scale = static_cast<float>(q_scale);
        a.q_zero_point = q_zero_point;
    }
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = out.data();
    a.scale = static_cast<float>(scale);
    a.threads = threads;
    if (f32)
        run_capturable(lookup_attention_f32(select(max_isa)), "attention_f32", a);
    else
        run_capturable(lookup_attention(select(max_isa)), "attention", a);
}

}  // namespace

void bind_attention(nb::module_& m) {
    m.def("attention", &attention, "q"_a, "k"_a, "v"_a, "mask"_a.none(), "out"_a, "scale"_a, "max_isa"_a.none(),
          "threads"_a, "q_scale"_a = 1.0, "q_zero_point"_a = 0, "q_multipliers"_a = nb::none(),
          "out = softmax(q k^T * scale + mask) v: bf16 (AMX or AVX512-BF16) or float32 (AVX2 or AVX-512); an "
          "int8/uint8 out gets it quantized");
}

}  // namespace ipxc
