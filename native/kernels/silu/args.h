// The argument struct(s) of the silu kernel(s) (see native/include/ipxc/kernels.h).
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"

namespace ipxc {

// Element-wise kernels over n contiguous elements.
struct UnaryArgs {
    const void* x = nullptr;
    void* y = nullptr;
    int64_t n = 0;
    DType dtype = DType::f32;
    int threads = 1;
};
// y [rows, cols] (contiguous) = f(a, b) over rows of a and b that lie a_row_stride / b_row_stride
// elements apart (a SwiGLU's gate and up halves are two column slices of one GEMM output).
struct RowsBinaryArgs {
    const void* a = nullptr;
    const void* b = nullptr;
    void* y = nullptr;
    int64_t rows = 0, cols = 0, a_row_stride = 0, b_row_stride = 0;
    DType dtype = DType::f32;
    int threads = 1;
};

}  // namespace ipxc
