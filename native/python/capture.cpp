// capture(): a list of kernel calls recorded once and replayed with no Python between them.
//
// A bound plan (ipexconvert/runtime/bound_plan.py) makes the same native calls with the same tensors at every
// decode step. capture() calls each of the Python callables it is given with recording on (run_capturable() in
// bind_common.h: every check of the binding runs, then the kernel function and its argument struct are stored
// instead of called) and returns a CallList that makes them all, in order, in one call with the GIL released:
// no Python frame, argument conversion or GIL hand-off between two kernels. The caller keeps the tensors alive
// and their shapes and storage unchanged while it uses the list (the plan owns them).
#include <cstring>

#include "bind_common.h"
#include "ipxc/native_call.h"

namespace ipxc {

Capture*& active_capture() {
    thread_local Capture* capture = nullptr;
    return capture;
}

namespace {

class CallList {
public:
    CallList(std::vector<std::function<void()>> calls, std::vector<nb::object> keep)
        : calls_(std::move(calls)), keep_(std::move(keep)) {}
    void operator()() const {
        nb::gil_scoped_release release;
        for (const auto& call : calls_) call();
    }
    size_t size() const { return calls_.size(); }

private:
    std::vector<std::function<void()>> calls_;
    std::vector<nb::object> keep_;  // the objects whose native calls are among calls_ (their contexts live in them)
};

// The call an object of another extension module hands over (its `native_call` capsule: native_call.h), or null.
const IpxcNativeCall* native_call_of(const nb::callable& call) {
    if (!nb::hasattr(call, "native_call")) return nullptr;
    nb::object capsule = call.attr("native_call");
    if (!PyCapsule_IsValid(capsule.ptr(), IPXC_NATIVE_CALL_CAPSULE)) fail("native_call is not a native call capsule");
    return static_cast<const IpxcNativeCall*>(PyCapsule_GetPointer(capsule.ptr(), IPXC_NATIVE_CALL_CAPSULE));
}

// Each callable must make exactly one native call, of a kernel that can be recorded, or hand over a call of another
// module (`native_call`: ipexconvert._dnnl's bound layers); otherwise (a kernel that cannot, a call of torch, which
// would run now instead of being recorded, or none) the answer is None and the caller keeps calling them itself.
std::optional<CallList> capture(const std::vector<nb::callable>& calls) {
    if (active_capture() != nullptr) fail("capture() cannot be nested");
    Capture recorded;
    std::vector<nb::object> keep;
    active_capture() = &recorded;
    try {
        for (const nb::callable& call : calls) {
            if (const IpxcNativeCall* native = native_call_of(call)) {
                keep.push_back(nb::borrow(call));
                recorded.calls.push_back([native] {
                    if (const char* error = native->run(native->context)) throw std::runtime_error(error);
                });
                continue;
            }
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
    return CallList(std::move(recorded.calls), std::move(keep));
}

// out = table[length_at - first]: a value that depends only on the cache length (a decode step's rotary rows and
// mask), computed ahead for a range of lengths, chosen by the length a cell holds when the call runs (recorded
// under a capture, like a kernel whose arguments point only into the tensors it was given).
void copy_row(nb::handle table_obj, nb::handle out_obj, nb::handle length_at_obj, int64_t first) {
    const TensorArg table(table_obj, "table"), out(out_obj, "out");
    check_cpu_contiguous(table);
    check_cpu_contiguous(out);
    check_same_dtype(out, table);
    if (table.ndim() < 1 || table.shape(0) < 1) fail("table " + table.shape_str() + " has no rows");
    if (table.dtype().lanes != 1 || table.dtype().bits % 8 != 0) fail("table has dtype " + table.dtype_str());
    const int64_t rows = table.shape(0), row_size = table.size() / rows;
    if (out.size() != row_size)
        fail("out " + out.shape_str() + " must have the " + std::to_string(row_size) + " elements of a row of table " +
             table.shape_str());
    const int64_t* length_at = length_cell(length_at_obj);
    const size_t row_bytes = static_cast<size_t>(row_size) * (table.dtype().bits / 8);
    const char* rows_data = static_cast<const char*>(table.data());
    char* target = static_cast<char*>(out.data());
    auto copy = [=] {
        const int64_t row = *length_at - first;
        if (row < 0 || row >= rows)
            throw std::out_of_range("copy_row: length " + std::to_string(*length_at) + " is not in the table's [" +
                                    std::to_string(first) + ", " + std::to_string(first + rows) + ")");
        std::memcpy(target, rows_data + static_cast<size_t>(row) * row_bytes, row_bytes);
    };
    Capture* capture = active_capture();
    if (capture != nullptr) return capture->calls.push_back(copy);
    copy();
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
    m.def("copy_row", &copy_row, "table"_a, "out"_a, "length_at"_a, "first"_a,
          "out = table[length_at - first] (a length cell: a 1-element int64 tensor, read when the call runs; "
          "recorded under a capture).");
}

}  // namespace ipxc
