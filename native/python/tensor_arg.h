// TensorArg: a borrowed view (pointer, dtype, shape, strides) of a tensor passed from Python.
//
// Two ways in, both DLPack:
//  * the DLPack C exchange API (type(obj).__dlpack_c_exchange_api__, torch >= 2.10): a C call
//    fills a non-owning DLTensor in well under a microsecond;
//  * otherwise nanobind's ndarray import, which calls obj.__dlpack__() (or the buffer protocol
//    for numpy). On torch that Python method costs ~6 us per tensor.
// The view is valid while the Python object is alive, i.e. for the duration of the call.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>
#include <string>

namespace ipxc {

namespace nb = nanobind;

// The part of DLPack's DLPackExchangeAPI (dlpack.h, v1.2+) we use, declared here so the build
// needs no framework headers. The header layout is stable across DLPack versions; we check the
// major version before using the table.
struct DLPackExchangeHeader {
    uint32_t major, minor;
    DLPackExchangeHeader* prev_api;
};
struct DLPackExchangeApi {
    DLPackExchangeHeader header;
    void* managed_tensor_allocator;
    void* managed_tensor_from_py_object_no_sync;
    void* managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out);  // may be null
    void* current_work_stream;
};

class TensorArg {
  public:
    // Imports `obj` (a tensor or array); `name` is used in error messages.
    TensorArg(nb::handle obj, const char* name);

    const char* name() const { return name_; }
    void* data() const { return static_cast<char*>(dl_.data) + dl_.byte_offset; }
    int ndim() const { return dl_.ndim; }
    int64_t shape(int i) const { return dl_.shape[i]; }
    // Element strides; compact row-major when the producer gave none.
    int64_t stride(int i) const;
    int64_t size() const;
    nb::dlpack::dtype dtype() const { return dl_.dtype; }
    bool on_cpu() const { return dl_.device.device_type == 1; }  // kDLCPU
    bool is_f32() const { return dl_.dtype == nb::dtype<float>(); }
    bool is_bf16() const;
    bool is_contiguous() const;  // row-major; size-1 dims may have any stride
    std::string shape_str() const;
    std::string dtype_str() const;

  private:
    const char* name_;
    nb::dlpack::dltensor dl_{};
    std::optional<nb::ndarray<>> fallback_;  // keeps the nanobind import alive
};

// An optional tensor argument: None -> empty.
inline std::optional<TensorArg> optional_tensor(nb::handle obj, const char* name) {
    if (obj.is_none()) return std::nullopt;
    return TensorArg(obj, name);
}

}  // namespace ipxc
