// parallel_for on OpenMP (compiled for the generic level).
//
// The extension links libgomp.so.1, and torch is always loaded first (ipexconvert.native imports
// it before the extension), so that name resolves to the runtime torch already runs: one thread
// team for oneDNN, torch and these kernels. A pool of our own measured worse between oneDNN calls
// (docs/native.md, "Threads"): its sleeping workers had to be woken while torch's OpenMP threads
// still spun on the same cores, and the caller waited for them.
#include "ipxc/parallel.h"

#include <omp.h>

#include <cstddef>
#include <vector>

namespace ipxc {

void parallel_for(int64_t n, int64_t grain, int threads, RangeFn fn, void* ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t useful = n / grain;  // more threads than grain-sized pieces would only add overhead
    if (threads > useful) threads = static_cast<int>(useful);
    if (threads <= 1 || omp_in_parallel()) {
        fn(ctx, 0, n);
        return;
    }
    // A few chunks per thread so a slow (shared) core does not hold everyone up.
    int64_t chunk = (n + 4 * threads - 1) / (4 * threads);
    if (chunk < grain) chunk = grain;
    const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * chunk;
        fn(ctx, begin, begin + chunk < n ? begin + chunk : n);
    }
}

float* scratch_floats(int64_t n) {
    thread_local std::vector<float> buffer;
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
    return buffer.data();
}

}  // namespace ipxc
