// Python binding of the rope kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

constexpr int64_t kMaxDim = 1024;  // rope.cpp's row buffers

DType float_dtype(const TensorArg& t) {
    if (!t.on_cpu()) fail(std::string(t.name()) + " is not on the CPU; move it with .cpu() first");
    if (t.is_f32()) return DType::f32;
    if (t.is_bf16()) return DType::bf16;
    fail(std::string(t.name()) + " has dtype " + t.dtype_str() + "; rope takes float32 or bfloat16");
}

// cos, sin [1 or batch, 1, seq, dim] contiguous, one dtype: fills the table fields of a.
template <class Args>
void rope_tables(const TensorArg& cos, const TensorArg& sin, Args& a) {
    a.table_dtype = float_dtype(cos);
    check_same_dtype(sin, cos);
    check_cpu_contiguous(cos);
    check_cpu_contiguous(sin);
    if (cos.ndim() != 4 || sin.ndim() != 4 || cos.shape(1) != 1 || cos.shape(2) != a.seq || cos.shape(3) != a.dim ||
        (cos.shape(0) != 1 && cos.shape(0) != a.batch))
        fail("cos " + cos.shape_str() + " must be [1 or " + std::to_string(a.batch) + ", 1, " + std::to_string(a.seq) +
             ", " + std::to_string(a.dim) + "]");
    for (int i = 0; i < 4; ++i)
        if (sin.shape(i) != cos.shape(i)) fail("sin " + sin.shape_str() + " and cos " + cos.shape_str() + " differ");
    a.table_batch = cos.shape(0);
    a.cos = cos.data(), a.sin = sin.data();
}

// x [batch, heads, seq, dim] (last dim contiguous); cos, sin [1 or batch, 1, seq, dim] contiguous;
// out [batch, heads, seq, dim] contiguous, x's dtype.
void rope(nb::handle x_obj, nb::handle cos_obj, nb::handle sin_obj, nb::handle out_obj, const OptStr& max_isa,
          int threads) {
    const TensorArg x(x_obj, "x"), cos(cos_obj, "cos"), sin(sin_obj, "sin"), out(out_obj, "out");
    RopeArgs a;
    a.dtype = float_dtype(x);
    if (x.ndim() != 4) fail("x must be [batch, heads, seq, dim], got " + x.shape_str());
    a.batch = x.shape(0), a.heads = x.shape(1), a.seq = x.shape(2), a.dim = x.shape(3);
    if (a.dim < 2 || a.dim % 2 != 0 || a.dim > kMaxDim)
        fail("the head size " + std::to_string(a.dim) + " must be even and at most " + std::to_string(kMaxDim));
    if (x.stride(3) != 1) fail("x " + x.shape_str() + " needs a contiguous last dim");
    for (int i = 0; i < 3; ++i) {
        if (x.stride(i) < 0) fail("x has a negative stride");
        a.x_strides[i] = x.stride(i);
    }
    check_cpu_contiguous(out);
    check_same_dtype(out, x);
    if (out.ndim() != 4 || out.shape(0) != a.batch || out.shape(1) != a.heads || out.shape(2) != a.seq || out.shape(3) != a.dim)
        fail("out " + out.shape_str() + " must have x's shape " + x.shape_str());
    rope_tables(cos, sin, a);
    a.x = x.data(), a.out = out.data();
    a.threads = threads;
    run(lookup_rope(select(max_isa)), "rope", a);
}

// q_out [batch, heads, seq, dim] and the caches [batch, kv_heads, capacity, dim], contiguous, one float dtype (the
// caches may be bfloat16 beside float32, or int8 rows [batch, kv_heads, capacity, dim + 4]: ir/ops/_kv_int8.py);
// q, k, v [batch, seq, width] (last dim contiguous, other strides any), each read at columns
// [offset, offset + its heads * dim) (the same tensor three times for a merged projection); positions
// [position, position + seq) of the caches are written. With length_at (a length cell, bind_common.h) the call
// can be recorded: position is then -1 and the cell holds it, read when the call runs (now, or in each recorded run).
void rope_kv_append(nb::handle q_obj, int64_t q_offset, nb::handle k_obj, int64_t k_offset, nb::handle v_obj,
                    int64_t v_offset, nb::handle cos_obj, nb::handle sin_obj, nb::handle q_out_obj,
                    nb::handle key_cache_obj, nb::handle value_cache_obj, int64_t position, const OptStr& max_isa,
                    int threads, nb::handle length_at_obj) {
    const TensorArg q(q_obj, "q"), k(k_obj, "k"), v(v_obj, "v"), cos(cos_obj, "cos"), sin(sin_obj, "sin");
    const TensorArg q_out(q_out_obj, "q_out"), key_cache(key_cache_obj, "key_cache"),
        value_cache(value_cache_obj, "value_cache");
    RopeKvAppendArgs a;
    a.dtype = float_dtype(q_out);
    check_cpu_contiguous(q_out);
    if (q_out.ndim() != 4) fail("q_out must be [batch, heads, seq, dim], got " + q_out.shape_str());
    a.batch = q_out.shape(0), a.heads = q_out.shape(1), a.seq = q_out.shape(2), a.dim = q_out.shape(3);
    if (a.dim < 2 || a.dim % 2 != 0 || a.dim > kMaxDim)
        fail("the head size " + std::to_string(a.dim) + " must be even and at most " + std::to_string(kMaxDim));
    for (const TensorArg* cache : {&key_cache, &value_cache}) {
        check_cpu_contiguous(*cache);
        check_same_dtype(*cache, key_cache);
        const DType cache_dtype = cache_rows_dtype(*cache);
        if (!(cache_dtype == a.dtype || cache_dtype == DType::s8_rows ||
              (cache_dtype == DType::bf16 && a.dtype == DType::f32)))
            fail(std::string(cache->name()) + " is " + cache->dtype_str() + " beside " + q_out.dtype_str() +
                 " q_out: a cache is q's dtype, bfloat16 beside float32, or int8 rows");
        const int64_t width = cache_dtype == DType::s8_rows ? a.dim + 4 : a.dim;  // (an int8 row: codes and a scale)
        if (cache->ndim() != 4 || cache->shape(0) != a.batch || cache->shape(3) != width ||
            cache->shape(1) != key_cache.shape(1) || cache->shape(2) != key_cache.shape(2))
            fail(std::string(cache->name()) + " " + cache->shape_str() + " must be [" + std::to_string(a.batch) +
                 ", kv_heads, capacity, " + std::to_string(width) + "], as key_cache " + key_cache.shape_str());
    }
    a.kv_heads = key_cache.shape(1), a.capacity = key_cache.shape(2);
    a.cache_dtype = cache_rows_dtype(key_cache);
    if (a.kv_heads < 1) fail("the caches have no heads");
    const int64_t* length_at = length_at_obj.is_none() ? nullptr : length_cell(length_at_obj);
    if (length_at != nullptr) {
        if (position != -1) fail("with length_at, position must be -1 (the cell holds it)");
        position = *length_at;
    }
    if (position < 0 || position > a.capacity - a.seq)
        fail("positions [" + std::to_string(position) + ", " + std::to_string(position) + " + " +
             std::to_string(a.seq) + ") do not fit a cache of " + std::to_string(a.capacity) + " positions");
    a.position = position;
    const TensorArg* sources[3] = {&q, &k, &v};
    const int64_t offsets[3] = {q_offset, k_offset, v_offset}, heads[3] = {a.heads, a.kv_heads, a.kv_heads};
    for (int part = 0; part < 3; ++part) {
        const TensorArg& t = *sources[part];
        if (!t.on_cpu()) fail(std::string(t.name()) + " is not on the CPU; move it with .cpu() first");
        check_same_dtype(t, q_out);
        if (t.ndim() != 3 || t.shape(0) != a.batch || t.shape(1) != a.seq)
            fail(std::string(t.name()) + " " + t.shape_str() + " must be [" + std::to_string(a.batch) + ", " +
                 std::to_string(a.seq) + ", columns]");
        const int64_t columns = heads[part] * a.dim;
        if (offsets[part] < 0 || offsets[part] > t.shape(2) - columns)
            fail(std::string(t.name()) + "'s columns [" + std::to_string(offsets[part]) + ", +" +
                 std::to_string(columns) + ") are not within its " + std::to_string(t.shape(2)) + " columns");
        if (t.stride(2) != 1 && t.shape(2) > 1) fail(std::string(t.name()) + " needs a contiguous last dim");
        for (int i = 0; i < 2; ++i) {
            if (t.stride(i) < 0) fail(std::string(t.name()) + " has a negative stride");
            a.source_strides[part][i] = t.stride(i);
        }
        a.source[part] = static_cast<const char*>(t.data()) + offsets[part] * (a.dtype == DType::bf16 ? 2 : 4);
    }
    rope_tables(cos, sin, a);
    a.q_out = q_out.data(), a.key_cache = key_cache.data(), a.value_cache = value_cache.data();
    a.threads = threads;
    const auto fn = lookup_rope_kv_append(select(max_isa));
    if (length_at == nullptr) return run(fn, "rope_kv_append", a);
    run_capturable_patched(fn, "rope_kv_append", a, [length_at](RopeKvAppendArgs& r) {
        r.position = length_that_fits(length_at, r.seq, r.capacity, "rope_kv_append");
    });
}

}  // namespace

void bind_rope(nb::module_& m) {
    m.def("rope", &rope, "x"_a, "cos"_a, "sin"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
    m.def("rope_kv_append", &rope_kv_append, "q"_a, "q_offset"_a, "k"_a, "k_offset"_a, "v"_a, "v_offset"_a, "cos"_a,
          "sin"_a, "q_out"_a, "key_cache"_a, "value_cache"_a, "position"_a, "max_isa"_a.none(), "threads"_a,
          "length_at"_a.none() = nb::none());
}

}  // namespace ipxc
