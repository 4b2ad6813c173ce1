// Python binding of the decode_attention kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

// q, out [batch, heads, q_len, head_dim]; k, v [batch, kv_heads, kv_len, head_dim] (heads a multiple of
// kv_heads); q and out float32 or bfloat16, k and v alike, q's dtype or bfloat16 beside float32 q, or int8 rows
// [batch, kv_heads, kv_len, head_dim + 4] (codes and a float32 scale: ir/ops/_kv_int8.py); last dims contiguous;
// optional additive mask broadcastable to [batch, heads, q_len, kv_len] (float32 / bfloat16, last dim contiguous).
// With length_at (a length cell, bind_common.h) the call can be recorded: k, v and the mask are buffers of
// `capacity` positions (k's dim 2; the mask's last dim alike) of which the first kv_len = length_at + q_len are
// read, the cell's value now and, in each recorded run, then.
void decode_attention(nb::handle q_obj, nb::handle k_obj, nb::handle v_obj, nb::handle out_obj, nb::handle mask_obj,
                      double scale, const OptStr& max_isa, int threads, nb::handle length_at_obj) {
    const TensorArg q(q_obj, "q"), k(k_obj, "k"), v(v_obj, "v"), out(out_obj, "out");
    const auto mask = optional_tensor(mask_obj, "mask");
    DecodeAttentionArgs a;
    for (const TensorArg* t : {&q, &k, &v, &out}) {
        if (!t->on_cpu()) fail(std::string(t->name()) + " is not on the CPU; move it with .cpu() first");
        const bool cache = t == &k || t == &v;
        if (!t->is_f32() && !t->is_bf16() && !(cache && is(*t, nb::dtype<int8_t>())))
            fail(std::string(t->name()) + " has dtype " + t->dtype_str() + "; decode_attention takes float32 or "
                 "bfloat16" + (cache ? " (or int8 cache rows)" : ""));
        check_same_dtype(*t, t == &k || t == &v ? k : q);
        if (t->ndim() != 4) fail(std::string(t->name()) + " " + t->shape_str() + " must be 4-D: [batch, heads, seq, head_dim]");
        if (t->stride(3) != 1) fail(std::string(t->name()) + " " + t->shape_str() + " needs a contiguous last dim");
        for (int d = 0; d < 3; ++d)
            if (t->stride(d) < 0) fail(std::string(t->name()) + " has a negative stride");
    }
    a.dtype = q.is_f32() ? DType::f32 : DType::bf16;
    a.kv_dtype = cache_rows_dtype(k);
    if (a.kv_dtype == DType::f32 && a.dtype == DType::bf16)
        fail("k and v are float32 beside bfloat16 q; a cache may be narrower than q, not wider");
    a.batch = q.shape(0), a.heads = q.shape(1), a.q_len = q.shape(2), a.head_dim = q.shape(3);
    a.kv_heads = k.shape(1), a.kv_len = k.shape(2);
    if (a.head_dim < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0)
        fail("q " + q.shape_str() + " and k " + k.shape_str() + ": the query heads must be a multiple of the key/value heads");
    if (a.kv_len < 1) fail("k " + k.shape_str() + " has no keys");
    const int64_t width = a.kv_dtype == DType::s8_rows ? a.head_dim + 4 : a.head_dim;  // (an int8 row: codes, scale)
    if (k.shape(0) != a.batch || k.shape(3) != width)
        fail("k " + k.shape_str() + " does not match q " + q.shape_str() +
             (a.kv_dtype == DType::s8_rows ? " (int8 rows hold head_dim codes and a 4-byte scale)" : ""));
    for (int d = 0; d < 4; ++d) {
        if (v.shape(d) != k.shape(d)) fail("v " + v.shape_str() + " must have k's shape " + k.shape_str());
        if (out.shape(d) != q.shape(d)) fail("out " + out.shape_str() + " must have q's shape " + q.shape_str());
    }
    for (int d = 0; d < 3; ++d) {
        a.q_strides[d] = q.stride(d), a.k_strides[d] = k.stride(d), a.v_strides[d] = v.stride(d);
        a.out_strides[d] = out.stride(d);
    }
    if (mask) {
        const int64_t want[4] = {a.batch, a.heads, a.q_len, a.kv_len};
        a.mask = additive_mask(*mask, want, &a.mask_dtype, a.mask_strides);
    }
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = out.data();
    a.scale = static_cast<float>(scale);
    a.threads = threads;
    const bool nothing = a.batch == 0 || a.heads == 0 || a.q_len == 0;  // out has no elements (the kernel divides by them)
    const auto fn = lookup_decode_attention(select(max_isa));
    if (length_at_obj.is_none()) return nothing ? void() : run(fn, "decode_attention", a);
    // (the checks above took kv_len as the whole capacity: every position a run may read is within k, v and mask)
    const int64_t* length_at = length_cell(length_at_obj);
    const int64_t capacity = a.kv_len;
    const auto patch = [length_at, capacity](DecodeAttentionArgs& r) {
        r.kv_len = length_that_fits(length_at, r.q_len, capacity, "decode_attention") + r.q_len;
    };
    patch(a);  // (now: the same check and length as a recorded run's)
    if (!nothing) run_capturable_patched(fn, "decode_attention", a, patch);
}

}  // namespace

void bind_decode_attention(nb::module_& m) {
    m.def("decode_attention", &decode_attention, "q"_a, "k"_a, "v"_a, "out"_a, "mask"_a.none(), "scale"_a,
          "max_isa"_a.none(), "threads"_a, "length_at"_a.none() = nb::none());
}

}  // namespace ipxc
