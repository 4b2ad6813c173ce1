// parallel_for on OpenMP (compiled for the generic level).
//
// The extension links libgomp.so.1, and torch is always loaded first (ipexconvert.native imports
// it before the extension), so that name resolves to the runtime torch already runs: one thread
// team for oneDNN, torch and these kernels. A pool of our own measured worse between oneDNN calls
// (docs/native.md, "Threads"): its sleeping workers had to be woken while torch's OpenMP threads
// still spun on the same cores, and the caller waited for them.
#include "ipxc/parallel.h"

#include <omp.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

namespace ipxc {

void parallel_for(int64_t n, int64_t grain, int threads, RangeFn fn, void* ctx, int64_t max_chunk) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t useful = n / grain;  // more workers than grain-sized pieces would only add overhead
    const int64_t workers = threads < useful ? threads : useful;
    if (workers <= 1 || omp_in_parallel()) {
        fn(ctx, 0, n);
        return;
    }
    // A few chunks per worker so a slow (shared) core does not hold everyone up.
    int64_t chunk = (n + 4 * workers - 1) / (4 * workers);
    // A stream over many megabytes (a decode GEMV) in bounded ranges: the team's wait at the end is at most one
    // range's time, where 4 ranges a thread left one thread ~1/8 of a large GEMV idle (docs/native.md, "Threads").
    if (max_chunk > 0 && chunk > max_chunk) chunk = max_chunk;
    if (chunk < grain) chunk = grain;
    const int64_t chunks = (n + chunk - 1) / chunk;
    // The team is always `threads` strong (the caller passes torch's thread count), even when fewer threads have
    // chunks: libgomp ends a pool's surplus threads when a smaller team starts and creates them again for the next
    // bigger one, a clone per thread per region (torch's at::parallel_for leaves out num_threads for that reason).
    // On the 16-core AMX host that churn made every op between two of ours slow (docs/native.md, "Threads").
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * chunk;
        fn(ctx, begin, begin + chunk < n ? begin + chunk : n);
    }
}

std::vector<int64_t> team_thread_ids(int threads) {
    if (threads < 1) threads = 1;
    std::vector<int64_t> ids(static_cast<size_t>(threads), -1);
    if (omp_in_parallel()) {
        ids.assign(1, static_cast<int64_t>(syscall(SYS_gettid)));
        return ids;
    }
    // num_threads(threads) as parallel_for's regions, so libgomp forms the same team and keeps its threads
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num();
        if (t < threads) ids[static_cast<size_t>(t)] = static_cast<int64_t>(syscall(SYS_gettid));
    }
    return ids;
}

float* scratch_floats(int64_t n) {
    thread_local std::vector<float> buffer;
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
    return buffer.data();
}

}  // namespace ipxc
