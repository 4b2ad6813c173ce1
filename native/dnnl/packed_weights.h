// PackedWeights: a layer's constant weights in the plain layout the caller gave, plus one copy per
// blocked layout a primitive asked for (reordered once, on the first plan that wants it). Plans
// for other input sizes usually want the same layout, so this is normally one copy.
#pragma once

#include <dnnl.hpp>

#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine.h"

namespace ipxc_dnnl {

class PackedWeights {
  public:
    // Copies `data` (laid out as `plain` says, `bytes` long): the caller may free it. Called once,
    // before any as(). A buffer of another size than the layout's is refused, never over-read.
    void init(const dnnl::memory::desc& plain, const void* data, size_t bytes) {
        if (plain.get_size() != bytes)
            invalid("the weight holds " + std::to_string(bytes) + " bytes; the layer's geometry needs " +
                    std::to_string(plain.get_size()));
        plain_ = dnnl::memory(plain, cpu_engine());
        std::memcpy(plain_.get_data_handle(), data, plain.get_size());
    }

    // The weights in layout `want`. A reorder into a layout that carries int8 compensation also computes it.
    // `source`, if given, makes them from other dims: it gets the plain weights and returns them as a
    // memory of its own (a conv's OIHW as a matmul's {in, out}); called only when `want` is new.
    template <class Source = std::nullptr_t>
    dnnl::memory as(const dnnl::memory::desc& want, Source source = nullptr) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [desc, memory] : packed_)
            if (desc == want) return memory;
        dnnl::memory packed(want, cpu_engine());
        dnnl::memory plain = plain_;
        if constexpr (!std::is_same_v<Source, std::nullptr_t>) plain = source(plain_);
        dnnl::reorder(plain, packed).execute(thread_stream(), plain, packed);
        thread_stream().wait();
        packed_.emplace_back(want, packed);
        return packed;
    }

  private:
    dnnl::memory plain_;
    std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed_;
    std::mutex mutex_;
};

}  // namespace ipxc_dnnl
