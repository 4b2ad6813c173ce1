// The argument struct(s) of the embedding kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// y[i, :] = weight[indices[i], :]. The kernel checks every index first; if one is outside
// [0, vocab) it copies nothing and sets *bad_position to its position (else -1).
struct EmbeddingArgs {
    const void* weight = nullptr;    // [vocab, dim], f32 or bf16
    const void* indices = nullptr;   // n, int64 or int32
    bool indices_i32 = false;
    void* y = nullptr;               // [n, dim]
    int64_t n = 0, vocab = 0, dim = 0;
    DType dtype = DType::f32;
    int64_t* bad_position = nullptr;
    int threads = 1;
};

}  // namespace ipxc
