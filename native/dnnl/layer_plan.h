// LayerPlan: what a direct layer keeps per input size (in its PlanCache): the primitive, its
// packed weights, and the memory descriptors a run wraps the caller's buffers in.
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "engine.h"

namespace ipxc_dnnl {

struct LayerPlan {
    dnnl::primitive primitive;
    dnnl::memory weights;  // packed as this primitive wants; empty for pooling
    dnnl::memory::desc scratchpad, src, dst;
    std::string implementation;  // oneDNN's name for it, e.g. brg:avx512_core_amx
    bool im2col = false;  // a conv run as a matmul over its im2col rows (conv.cpp)
    uint64_t id = next_plan_id();  // never reused in the process: keys the per-thread run memories below
};

// A primitive's arguments as oneDNN's C API takes them: (key, memory) pairs in place, so a run
// allocates nothing for them (a std::unordered_map did, every call). The memories are owned
// elsewhere (the layer, the plan, this thread's run memories) and outlive the run.
class Args {
  public:
    void set(int key, const dnnl::memory& memory) {
        for (int i = 0; i < count_; ++i)
            if (args_[i].arg == key) {
                args_[i].memory = memory.get();
                return;
            }
        if (count_ == kCapacity) throw std::logic_error("more oneDNN arguments than Args holds");
        args_[count_++] = {key, memory.get()};
    }
    int size() const { return count_; }
    const dnnl_exec_arg_t* data() const { return args_; }

  private:
    static constexpr int kCapacity = 16;
    dnnl_exec_arg_t args_[kCapacity];
    int count_ = 0;
};

// src, dst and scratchpad memories of one plan on one thread, pointed at the current call's
// buffers. Made on a thread's first run of the plan and kept in a small per-thread table by plan
// id (a slot another plan takes is remade when this one runs again): making the three oneDNN
// memory objects per call cost allocations on every run. They hold descriptors and pointers only,
// never a plan's weights.
struct RunMemories {
    uint64_t plan = 0;
    dnnl::memory src, dst, scratchpad;
};

inline RunMemories& run_memories(const LayerPlan& plan, const void* src, void* dst, void* scratch) {
    constexpr uint64_t kSlots = 64;
    thread_local RunMemories slots[kSlots];
    RunMemories& m = slots[plan.id % kSlots];
    if (m.plan != plan.id) {
        dnnl::engine& engine = cpu_engine();
        m.src = dnnl::memory(plan.src, engine, const_cast<void*>(src));
        m.dst = dnnl::memory(plan.dst, engine, dst);
        m.scratchpad = dnnl::memory(plan.scratchpad, engine, scratch);
        m.plan = plan.id;
    } else {
        m.src.set_data_handle(const_cast<void*>(src));
        m.dst.set_data_handle(dst);
        m.scratchpad.set_data_handle(scratch);
    }
    return m;
}

// The arguments every plan takes: src and dst over the caller's buffers, the weights, this thread's scratchpad.
inline Args plan_args(const LayerPlan& plan, const void* src, void* dst) {
    void* scratch = thread_buffer(ThreadBuffer::kScratchpad, plan.scratchpad.get_size());
    const RunMemories& m = run_memories(plan, src, dst, scratch);
    Args args;
    args.set(DNNL_ARG_SRC, m.src);
    args.set(DNNL_ARG_DST, m.dst);
    args.set(DNNL_ARG_SCRATCHPAD, m.scratchpad);
    if (plan.weights) args.set(DNNL_ARG_WEIGHTS, plan.weights);
    return args;
}

// Runs the plan's primitive on this thread's stream and waits for it.
inline void execute(const LayerPlan& plan, const Args& args) {
    dnnl::error::wrap_c_api(dnnl_primitive_execute(plan.primitive.get(), thread_stream().get(), args.size(), args.data()),
                            "could not execute a primitive");
    thread_stream().wait();
}

}  // namespace ipxc_dnnl
