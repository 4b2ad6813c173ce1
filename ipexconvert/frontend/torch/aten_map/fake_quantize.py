"""fake_quantize: aten.fake_quantize_per_tensor_affine (a quantization-aware-trained model) or the ONNX
frontend's Q -> DQ pairs (frontend/onnx/qdq_pairs.py), with a uint8 or int8 code range."""
from .. import custom_ops  # noqa: F401 (registers ipexconvert.fake_quantize)
from ._registry import Args, Converted, Unconvertible, maps_to

_DTYPE_OF_RANGE = {(0, 255): "uint8", (-128, 127): "int8"}


@maps_to("fake_quantize", "aten.fake_quantize_per_tensor_affine.default", "ipexconvert.fake_quantize.default")
def to_fake_quantize(target: str, args: Args) -> Converted:
    code_range = (args["quant_min"], args["quant_max"])
    if code_range not in _DTYPE_OF_RANGE:
        raise Unconvertible(f"code range {code_range} (uint8 0..255 or int8 -128..127 only)")
    return [args["input"]], {"scale": float(args["scale"]), "zero_point": int(args["zero_point"]),
                             "dtype": _DTYPE_OF_RANGE[code_range]}
