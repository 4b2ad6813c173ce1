// parallel_for over torch's own OpenMP runtime (see src/parallel.cpp), compiled for the generic
// level. The caller passes torch's thread setting, so torch.set_num_threads governs both.
#pragma once

#include <cstdint>
#include <vector>

namespace ipxc {

using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);

// Calls fn(ctx, begin, end) over disjoint ranges covering [0, n), using up to `threads`
// threads (the caller's included). Ranges hold at least `grain` items, so small jobs run on
// the calling thread alone. Nested calls (from inside fn) run serially. Ranges hold at most
// `max_chunk` items (0: no bound beyond the usual few ranges per thread; a ceiling below `grain`
// yields to the grain).
void parallel_for(int64_t n, int64_t grain, int threads, RangeFn fn, void* ctx, int64_t max_chunk = 0);

// A per-thread fp32 scratch buffer of at least n floats, valid until this thread's next call.
float* scratch_floats(int64_t n);

// The kernel thread ids of the calling thread's OpenMP team of `threads` (index 0: the caller), as a parallel
// region run from this thread sees them: libgomp keeps one pool per calling thread and reuses its threads, so
// these are the threads that run its later regions of that size (thread_placement.py pins them).
std::vector<int64_t> team_thread_ids(int threads);

}  // namespace ipxc
