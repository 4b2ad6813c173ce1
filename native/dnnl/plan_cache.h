// PlanCache: per-input-size oneDNN plans of one layer, created on first use and kept, at most
// kMaxPlans of them (a dynamic batch makes one per batch size seen; the least recently used goes,
// and a call still running keeps its copy through the shared_ptr).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

namespace ipxc_dnnl {

template <class Plan>
class PlanCache {
  public:
    using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;
    static constexpr size_t kMaxPlans = 8;

    // The plan for key, made by make() (called under the lock) when there is none.
    template <class Make>
    std::shared_ptr<Plan> get(const Key& key, Make make) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto found = plans_.find(key);
        if (found != plans_.end()) {
            found->second.second = ++tick_;
            return found->second.first;
        }
        if (plans_.size() >= kMaxPlans) {
            auto oldest = plans_.begin();
            for (auto it = plans_.begin(); it != plans_.end(); ++it)
                if (it->second.second < oldest->second.second) oldest = it;
            plans_.erase(oldest);
        }
        auto plan = std::make_shared<Plan>(make());
        plans_[key] = {plan, ++tick_};
        return plan;
    }

    size_t size() {
        std::lock_guard<std::mutex> lock(mutex_);
        return plans_.size();
    }

  private:
    std::map<Key, std::pair<std::shared_ptr<Plan>, uint64_t>> plans_;
    uint64_t tick_ = 0;
    std::mutex mutex_;
};

}  // namespace ipxc_dnnl
