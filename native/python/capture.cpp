// capture(): a list of kernel calls recorded once and replayed with no Python between them.
//
// A bound plan (ipexconvert/runtime/bound_plan.py) makes the same native calls with the same tensors at every
// decode step. capture() calls each of the Python callables it is given with recording on (run_capturable() in
// bind_common.h: every check of the binding runs, then the kernel function and its argument struct are stored
// instead of called) and returns a CallList that makes them all, in order, in one call with the GIL released:
// no Python frame, argument conversion or GIL hand-off between two kernels. The caller keeps the tensors alive
// and their shapes and storage unchanged while it uses the list (the plan owns them).
#include "bind_common.h"

namespace ipxc {

Capture*& active_capture() {
    thread_local Capture* capture = nullptr;
    return capture;
}

namespace {

class CallList {
public:
    explicit CallList(std::vector<std::function<void()>> calls) : calls_(std::move(calls)) {}
    void operator()() const {
        nb::gil_scoped_release release;
        for (const auto& call : calls_) call();
    }
    size_t size() const { return calls_.size(); }

private:
    std::vector<std::function<void()>> calls_;
};

// Each callable must make exactly one native call, of a kernel that can be recorded; otherwise (a kernel that
// cannot, a call of the oneDNN module or of torch, which would run now instead of being recorded, or none) the
// answer is None and the caller keeps calling them itself.
std::optional<CallList> capture(const std::vector<nb::callable>& calls) {
    if (active_capture() != nullptr) fail("capture() cannot be nested");
    Capture recorded;
    active_capture() = &recorded;
    try {
        for (const nb::callable& call : calls) {
            const size_t before = recorded.calls.size();
            call();
            if (recorded.refused != nullptr || recorded.calls.size() != before + 1) {
                active_capture() = nullptr;
                return std::nullopt;
            }
        }
    } catch (...) {
        active_capture() = nullptr;
        throw;
    }
    active_capture() = nullptr;
    return CallList(std::move(recorded.calls));
}

}  // namespace

void bind_capture(nb::module_& m) {
    nb::class_<CallList>(m, "CallList", "Kernel calls recorded by capture(); calling it makes them all, in order.")
        .def("__call__", &CallList::operator())
        .def("__len__", &CallList::size);
    m.def("capture", &capture, "calls"_a,
          "Records the native kernel call each callable makes (one each) and returns a CallList that makes them all "
          "in order with the GIL released; None when a callable makes a call that cannot be recorded (or not exactly "
          "one). The tensors the calls were given must stay alive and unchanged while the list is used.");
}

}  // namespace ipxc
