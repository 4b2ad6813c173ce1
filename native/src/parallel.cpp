// Fork-join thread pool (compiled for the generic level).
#include "ipxc/parallel.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace ipxc {

namespace {

thread_local bool t_in_parallel = false;

class Pool {
  public:
    // Runs the job on `threads` threads (the caller plus threads - 1 workers) and waits.
    void run(int64_t n, int64_t chunk, int threads, RangeFn fn, void* ctx) {
        std::lock_guard<std::mutex> one_job_at_a_time(run_mutex_);
        grow(threads - 1);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            fn_ = fn;
            ctx_ = ctx;
            n_ = n;
            chunk_ = chunk;
            next_.store(0);
            wanted_ = threads - 1;
            busy_ = threads - 1;
            ++generation_;
        }
        wake_.notify_all();
        work();  // the caller takes chunks too
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return busy_ == 0; });
    }

  private:
    // Takes chunks until none are left.
    void work() {
        t_in_parallel = true;
        for (;;) {
            const int64_t begin = next_.fetch_add(chunk_);
            if (begin >= n_) break;
            fn_(ctx_, begin, begin + chunk_ < n_ ? begin + chunk_ : n_);
        }
        t_in_parallel = false;
    }

    void grow(int workers) {
        while (static_cast<int>(threads_.size()) < workers) {
            const int index = static_cast<int>(threads_.size());
            threads_.emplace_back([this, index] { worker(index); });
            threads_.back().detach();  // never joined: the pool lives until the process exits
        }
    }

    void worker(int index) {
        uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return generation_ != seen && index < wanted_; });
                seen = generation_;
            }
            work();
            std::lock_guard<std::mutex> lock(mutex_);
            if (--busy_ == 0) done_.notify_one();
        }
    }

    std::mutex run_mutex_;
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::vector<std::thread> threads_;
    RangeFn fn_ = nullptr;
    void* ctx_ = nullptr;
    int64_t n_ = 0, chunk_ = 1;
    std::atomic<int64_t> next_{0};
    int wanted_ = 0, busy_ = 0;
    uint64_t generation_ = 0;
};

Pool* g_pool = nullptr;
std::once_flag g_pool_once;

// After fork() the child has no worker threads; give it a fresh pool (the old one is leaked
// on purpose: its mutexes may be held by threads that no longer exist).
void reset_pool_in_child() { g_pool = new Pool(); }

Pool& pool() {
    std::call_once(g_pool_once, [] {
        g_pool = new Pool();
        pthread_atfork(nullptr, nullptr, reset_pool_in_child);
    });
    return *g_pool;
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, int threads, RangeFn fn, void* ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t useful = n / grain;  // more threads than grain-sized pieces would only add overhead
    if (threads > useful) threads = static_cast<int>(useful);
    if (threads <= 1 || t_in_parallel) {
        fn(ctx, 0, n);
        return;
    }
    // A few chunks per thread so a slow (shared) core does not hold everyone up.
    int64_t chunk = (n + 4 * threads - 1) / (4 * threads);
    if (chunk < grain) chunk = grain;
    pool().run(n, chunk, threads, fn, ctx);
}

float* scratch_floats(int64_t n) {
    thread_local std::vector<float> buffer;
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
    return buffer.data();
}

}  // namespace ipxc
