// Types every kernel's argument struct may use (the structs themselves live in each kernel's folder,
// native/kernels/<folder>/args.h).
#pragma once

#include <cstdint>

namespace ipxc {

enum class DType : int { f32 = 0, bf16 = 1 };  // bf16 is stored as uint16 bits

// The most leading dims an additive mask may broadcast over (softmax).
constexpr int kMaxMaskDims = 8;

// ---- INT8 ----------------------------------------------------------------------------------------
// Quantized values are int8 or uint8 (`out_unsigned` / `in_unsigned`); rounding is half to
// even (as torch's nearbyint), results saturate to the type's range.
//
// quantize/dequantize see the tensor as [rows, cols]. Per tensor: one scale and zero point
// (rows may be anything). Per channel: channel = row, i.e. axis 0 of the tensor with the other
// dims flattened into cols (torch.quantize_per_channel(..., axis=0)).

}  // namespace ipxc
