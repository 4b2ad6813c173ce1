"""Example inputs from the command line: `--input NAME:SHAPE:DTYPE` or a safetensors file.

SHAPE is dims separated by `,` or else by `x` (with commas, names may contain `x`): numbers are static, names are dynamic dims
(`batch`, `seq`), optionally with a range: `batch[1..64]`. Example sizes used for
tracing: 2 for a dim named batch, 8 for other named dims (clamped to the range).

Example inputs must hold data (no zero-size dim: an empty batch traces nothing and its accuracy
check compares nothing), and generated ones are capped at MAX_EXAMPLE_BYTES each.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Optional

import torch
from pydantic import BaseModel, ConfigDict

from ...errors import UserInputError
from ...ir import dtypes
from ...ir.dynamic_dims import DynamicDim, DynamicDims

_DIM = re.compile(r"^(?:(?P<num>\d+)|(?P<name>[A-Za-wyz_][A-Za-z0-9_]*)(?:\[(?P<lo>\d+)\.\.(?P<hi>\d+)\])?)$")
DEFAULT_DIM_MAX = 4096
MAX_EXAMPLE_BYTES = 1 << 30  # one generated example tensor; real example inputs are a few MiB at most


class InputArg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    shape: list[int | DynamicDim]
    dtype: str = "float32"

    def to_text(self) -> str:
        """The NAME:SHAPE:DTYPE form parse_input_arg reads back (a config file's `inputs` entry)."""
        dims = [str(d) if isinstance(d, int) else f"{d.name}[{d.min}..{d.max}]" for d in self.shape]
        return f"{self.name}:{','.join(dims)}:{self.dtype}"


def parse_input_arg(text: str) -> InputArg:
    """NAME:SHAPE[:DTYPE] -> InputArg, with an error that shows the expected form."""
    usage = "write it as NAME:SHAPE[:DTYPE], e.g. pixel_values:1x3x224x224:float32 or input_ids:batch,seq:int64"
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise UserInputError(f"cannot read --input {text!r}", usage)
    name, shape_text = parts[0].strip(), parts[1].strip()
    dtype = parts[2].strip() if len(parts) == 3 else "float32"
    try:
        dtypes.to_torch(dtype)
    except ValueError as e:
        raise UserInputError(f"--input {text!r}: {e}", usage) from None
    shape: list[int | DynamicDim] = []
    # With commas, `x` is part of names (max_len); without, it separates dims (1x3x224x224, batchx128).
    separator = r"\s*,\s*" if "," in shape_text else r"\s*x\s*"
    for token in re.split(separator, shape_text):
        m = _DIM.match(token.strip())
        if not m:
            raise UserInputError(f"--input {text!r}: cannot read dimension {token!r}", usage + "; ranges look like batch[1..64]")
        if m["num"] is not None:
            if int(m["num"]) == 0:
                raise UserInputError(f"--input {text!r}: dim {len(shape)} is 0, so the example input would be empty",
                                     "give every static dim a size of at least 1 (an empty example checks nothing)")
            shape.append(int(m["num"]))
        else:
            lo, hi = (int(m["lo"]), int(m["hi"])) if m["lo"] else (1, DEFAULT_DIM_MAX)
            if lo > hi:
                raise UserInputError(f"--input {text!r}: range {lo}..{hi} is empty", "write the smaller bound first")
            shape.append(DynamicDim(name=m["name"], min=lo, max=hi))
    return InputArg(name=name, shape=shape, dtype=dtype)


def _example_size(dim: DynamicDim) -> int:
    want = 2 if dim.name == "batch" else 8
    return max(dim.min, min(dim.max, want))


def make_example_inputs(args: list[InputArg], int_high: int = 100, seed: int = 0) -> tuple[dict[str, torch.Tensor], DynamicDims]:
    """Random example tensors for the declared inputs, and the dynamic dims they declare."""
    generator = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    dynamic: dict[str, dict[int, DynamicDim]] = {}
    for arg in args:
        sizes = []
        for axis, d in enumerate(arg.shape):
            if isinstance(d, DynamicDim):
                dynamic.setdefault(arg.name, {})[axis] = d
                sizes.append(_example_size(d))
            else:
                sizes.append(d)
        dtype = dtypes.to_torch(arg.dtype)
        _check_size(arg.name, sizes, dtype)
        if dtype.is_floating_point:
            tensors[arg.name] = torch.randn(sizes, generator=generator).to(dtype)
        elif dtype == torch.bool:
            tensors[arg.name] = torch.ones(sizes, dtype=torch.bool)
        else:
            tensors[arg.name] = torch.randint(0, int_high, sizes, generator=generator, dtype=dtype)
    return tensors, dynamic


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _check_size(name: str, sizes: list[int], dtype: torch.dtype) -> None:
    """Refuse an example tensor too large to make (python ints: no overflow whatever the dims)."""
    nbytes = dtype.itemsize
    for s in sizes:
        nbytes *= s
    if nbytes > MAX_EXAMPLE_BYTES:
        shape = "x".join(map(str, sizes))
        raise UserInputError(f"--input {name}: an example of shape {shape} {dtypes.to_name(dtype)} would take "
                             f"{_human(nbytes)}, over the {_human(MAX_EXAMPLE_BYTES)} ipexconvert allows for one example input",
                             "give smaller static sizes (the example only has to be representative), or name the dim "
                             "(e.g. batch or seq[1..4096]) so it stays dynamic with a small example size")


def check_example_inputs(tensors: Mapping[str, object]) -> None:
    """Example inputs (from any source) must be tensors that hold data."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise UserInputError(f"example input {name} is a {type(t).__name__}, not a tensor",
                                 "pass one torch.Tensor per model input")
        if t.numel() == 0:
            raise UserInputError(f"example input {name} is empty (shape {tuple(t.shape)}): conversion would trace and "
                                 "check the model on no data",
                                 "use an example with at least one element along every dim (e.g. batch 1 or 2); "
                                 "name the dim (--input NAME:batch,...) if the model should accept other sizes")


def load_inputs_file(path: str | Path, expected: Optional[list[str]] = None) -> dict[str, torch.Tensor]:
    """Tensors from a safetensors file (keys are input names)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"inputs file {path} does not exist", "pass a .safetensors file whose keys are the input names")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as e:
        raise UserInputError(f"{path} is not a readable safetensors file ({e})",
                             "write inputs with safetensors.torch.save_file({'name': tensor}, path)") from None
    if not tensors:
        raise UserInputError(f"{path} holds no tensors", "save at least one tensor per model input")
    if expected is not None:
        missing = [n for n in expected if n not in tensors]
        if missing:
            raise UserInputError(f"{path} lacks input(s) {', '.join(missing)} (has: {', '.join(tensors)})",
                                 f"the model expects: {', '.join(expected)}")
        tensors = {n: tensors[n] for n in expected}
    return tensors
