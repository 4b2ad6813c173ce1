// Kernel signatures, the kernel list and the registration macro.
//
// Every kernel takes one argument struct of raw pointers and sizes, so the library never
// needs torch's headers: the binding fills the struct from DLPack tensors.
//
// A kernel lives in one folder, native/kernels/<folder>/: its source(s) (compiled once per level),
// args.h (its argument struct), bind.cpp (its Python binding) and kernel.cmake, whose
// ipxc_kernel(NAME ARGS LEVEL...) lines are the kernel list: CMake writes ipxc/kernel_args.h (every
// folder's args.h), ipxc/kernel_list.h (IPXC_KERNELS(X): X(name, Args) per kernel) and
// ipxc/kernel_bindings.h (IPXC_BINDINGS(X): X(folder) per binding) from them. Adding a kernel is
// one new folder; nothing shared is edited.
#pragma once

#include <cstdint>

#include "ipxc/kernel_types.h"
#include "ipxc/kernel_args.h"
#include "ipxc/kernel_list.h"

namespace ipxc {

#define IPXC_DECLARE_FN(name, Args) using name##_fn = void (*)(const Args&);
IPXC_KERNELS(IPXC_DECLARE_FN)
#undef IPXC_DECLARE_FN

}  // namespace ipxc

// Registers `fn` as kernel `name` for the level this file is being compiled for. Use it at
// namespace scope inside ipxc::IPXC_NS. It defines ipxc::<level>::<name>_entry, a constant
// function pointer (constant-initialised: no code runs at load time, which matters because
// this object file may contain instructions the CPU lacks). The dispatcher, compiled for the
// generic level, refers to every <level>::<name>_entry weakly; missing ones are null.
#define IPXC_REGISTER_KERNEL(name, fn)          \
    extern const ::ipxc::name##_fn name##_entry; \
    const ::ipxc::name##_fn name##_entry = &fn
