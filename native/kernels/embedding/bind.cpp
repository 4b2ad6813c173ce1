// Python binding of the embedding kernel(s): checks the tensors, fills the argument struct, runs the
// build for the selected level (compiled once, for the generic level; helpers in native/python/bind_common.h).
#include "bind_common.h"

namespace ipxc {
namespace {

void embedding(nb::handle weight_obj, nb::handle indices_obj, nb::handle out_obj, const OptStr& max_isa, int threads) {
    const TensorArg weight(weight_obj, "weight"), indices(indices_obj, "indices"), out(out_obj, "out");
    EmbeddingArgs a;
    a.dtype = activation_dtype(weight);
    if (weight.ndim() != 2) fail("weight " + weight.shape_str() + " must be 2-D [num_embeddings, embedding_dim]");
    check_cpu_contiguous(indices);
    if (is(indices, nb::dtype<int64_t>())) a.indices_i32 = false;
    else if (is(indices, nb::dtype<int32_t>())) a.indices_i32 = true;
    else fail("indices has dtype " + indices.dtype_str() + "; it must be int64 or int32");
    a.vocab = weight.shape(0);
    a.dim = weight.shape(1);
    a.n = indices.size();
    check_cpu_contiguous(out);
    check_same_dtype(out, weight);
    int64_t rows_size = 0;  // indices.numel() * dim, refused when it wraps (a huge index tensor of a huge dim)
    if (__builtin_mul_overflow(a.n, a.dim, &rows_size) || out.size() != rows_size)
        fail("out " + out.shape_str() + " must have indices.numel() * " + std::to_string(a.dim) + " elements");
    int64_t bad = -1;
    a.weight = weight.data();
    a.indices = indices.data();
    a.y = out.data();
    a.bad_position = &bad;
    a.threads = threads;
    run(lookup_embedding(select(max_isa)), "embedding", a);
    if (bad >= 0) {
        const int64_t v = a.indices_i32 ? static_cast<const int32_t*>(a.indices)[bad] : static_cast<const int64_t*>(a.indices)[bad];
        throw std::out_of_range("embedding index " + std::to_string(v) + " (at flat position " + std::to_string(bad) +
                                ") is out of range for a table of " + std::to_string(a.vocab) + " rows");
    }
}

}  // namespace

void bind_embedding(nb::module_& m) {
    m.def("embedding", &embedding, "weight"_a, "indices"_a, "out"_a, "max_isa"_a.none(), "threads"_a);
}

}  // namespace ipxc
