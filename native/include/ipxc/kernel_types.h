// Types every kernel's argument struct may use (the structs themselves live in each kernel's folder,
// native/kernels/<folder>/args.h).
#pragma once

#include <cstdint>

namespace ipxc {

// bf16 is stored as uint16 bits. s8_rows: a decoder's int8 KV cache (ir/ops/_kv_int8.py), rows of head_dim int8
// codes then the row's float32 scale (4 bytes; the value is code * scale); only the KV cache kernels take it.
enum class DType : int { f32 = 0, bf16 = 1, s8_rows = 2 };

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
