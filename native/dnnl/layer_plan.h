// LayerPlan: what a direct layer keeps per input size (in its PlanCache): the primitive, its
// packed weights, and the memory descriptors a run wraps the caller's buffers in.
#pragma once

#include <dnnl.hpp>

#include <string>
#include <unordered_map>

#include "engine.h"

namespace ipxc_dnnl {

struct LayerPlan {
    dnnl::primitive primitive;
    dnnl::memory weights;  // packed as this primitive wants; empty for pooling
    dnnl::memory::desc scratchpad, src, dst;
    std::string implementation;  // oneDNN's name for it, e.g. brg:avx512_core_amx
    bool im2col = false;  // a conv run as a matmul over its im2col rows (conv.cpp)
};

using Args = std::unordered_map<int, dnnl::memory>;

// The arguments every plan takes: src and dst over the caller's buffers, the weights, this thread's scratchpad.
inline Args plan_args(const LayerPlan& plan, const void* src, void* dst) {
    dnnl::engine& engine = cpu_engine();
    void* scratch = thread_buffer(ThreadBuffer::kScratchpad, plan.scratchpad.get_size());
    Args args{
        {DNNL_ARG_SRC, dnnl::memory(plan.src, engine, const_cast<void*>(src))},
        {DNNL_ARG_DST, dnnl::memory(plan.dst, engine, dst)},
        {DNNL_ARG_SCRATCHPAD, dnnl::memory(plan.scratchpad, engine, scratch)},
    };
    if (plan.weights) args[DNNL_ARG_WEIGHTS] = plan.weights;
    return args;
}

// Runs the plan's primitive on this thread's stream and waits for it.
inline void execute(const LayerPlan& plan, const Args& args) {
    plan.primitive.execute(thread_stream(), args);
    thread_stream().wait();
}

}  // namespace ipxc_dnnl
