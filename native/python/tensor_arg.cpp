// TensorArg: DLPack import, fast path first (see tensor_arg.h).
#include "tensor_arg.h"

#include <stdexcept>
#include <vector>

namespace ipxc {

namespace {

// type(obj).__dlpack_c_exchange_api__, cached per type (under the GIL). Null when the type has
// no usable table.
const DLPackExchangeApi* exchange_api(PyTypeObject* type) {
    struct Entry {
        PyTypeObject* type;
        const DLPackExchangeApi* api;
    };
    static std::vector<Entry> cache;
    for (const Entry& e : cache)
        if (e.type == type) return e.api;

    const DLPackExchangeApi* api = nullptr;
    PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
    if (capsule == nullptr) {
        PyErr_Clear();
    } else {
        if (PyCapsule_IsValid(capsule, "dlpack_exchange_api")) {
            auto* table = static_cast<const DLPackExchangeApi*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
            // Major version 1 is the layout declared in tensor_arg.h; the table lives for the process.
            if (table && table->header.major == 1 && table->dltensor_from_py_object_no_sync) api = table;
        }
        Py_DECREF(capsule);
    }
    Py_INCREF(type);  // keep the type (and its address) alive while it is in the cache
    cache.push_back({type, api});
    return api;
}

}  // namespace

TensorArg::TensorArg(nb::handle obj, const char* name) : name_(name) {
    if (const DLPackExchangeApi* api = exchange_api(Py_TYPE(obj.ptr()))) {
        if (api->dltensor_from_py_object_no_sync(obj.ptr(), &dl_) != 0) throw nb::python_error();
        return;
    }
    nb::ndarray<> array;
    if (!nb::try_cast(obj, array, /*convert=*/false))  // never a temporary copy: outputs are written in place
        throw nb::type_error((std::string(name) + " must be a tensor or an array supporting DLPack, got " +
                              nb::type_name(obj.type()).c_str()).c_str());
    fallback_ = array;
    dl_.data = array.data();  // byte offset already applied
    dl_.byte_offset = 0;
    dl_.device.device_type = array.device_type();
    dl_.device.device_id = array.device_id();
    dl_.ndim = static_cast<int32_t>(array.ndim());
    dl_.dtype = array.dtype();
    dl_.shape = const_cast<int64_t*>(array.shape_ptr());
    dl_.strides = const_cast<int64_t*>(array.stride_ptr());
}

int64_t TensorArg::stride(int i) const {
    if (dl_.strides) return dl_.strides[i];
    int64_t s = 1;
    for (int d = dl_.ndim - 1; d > i; --d) s *= dl_.shape[d];
    return s;
}

int64_t TensorArg::size() const {
    int64_t n = 1;
    for (int d = 0; d < dl_.ndim; ++d)
        if (__builtin_mul_overflow(n, dl_.shape[d], &n))  // a shape no memory can hold: never a wrapped count
            throw std::invalid_argument(std::string(name_) + " " + shape_str() + " has more elements than 64 bits count");
    return n;
}

bool TensorArg::is_bf16() const {
    return dl_.dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat) && dl_.dtype.bits == 16 &&
           dl_.dtype.lanes == 1;
}

bool TensorArg::is_contiguous() const {
    if (size() == 0) return true;  // no elements, nothing to misread
    int64_t expected = 1;
    for (int d = dl_.ndim - 1; d >= 0; --d) {
        if (dl_.shape[d] != 1 && stride(d) != expected) return false;
        expected *= dl_.shape[d];
    }
    return true;
}

std::string TensorArg::shape_str() const {
    std::string s = "[";
    for (int d = 0; d < dl_.ndim; ++d) s += (d ? ", " : "") + std::to_string(dl_.shape[d]);
    return s + "]";
}

std::string TensorArg::dtype_str() const {
    const char* kind = "unknown";
    switch (static_cast<nb::dlpack::dtype_code>(dl_.dtype.code)) {
        case nb::dlpack::dtype_code::Int: kind = "int"; break;
        case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
        case nb::dlpack::dtype_code::Float: kind = "float"; break;
        case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
        case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
        case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
        default: break;
    }
    return kind + std::to_string(dl_.dtype.bits);
}

}  // namespace ipxc
