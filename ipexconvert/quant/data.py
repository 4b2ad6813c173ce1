"""Calibration data for INT8 static quantization: load it, or make it, and validate every batch.

`--calib PATH` accepts:

* A `.safetensors` file whose keys are exactly the model's input names: one batch.
* A `.safetensors` file whose keys are `<input name>.<N>` (`input_ids.0`, `attention_mask.0`,
  `input_ids.1`, ...): several batches, taken in order of N (indices need not be contiguous).
  The index is what follows the last dot, so input names may contain dots themselves
  (`encoder.ids.0`). The two key styles cannot be mixed in one file.
* A folder: every `*.safetensors` file in it, sorted by name, each holding one or several batches
  as above. Other files are ignored.

Every batch must hold every model input and nothing else, with the model's dtype, rank, static
sizes and dynamic-dim ranges; inputs sharing a named dim must agree on its size (the same checks
the runtime applies to a converted model's inputs, see runtime.model.check_inputs).

Without data, `synthetic_calibration` makes random batches (dynamic dims sized as for the random
example inputs, see frontend.torch.inputs.make_example_inputs; integer/bool inputs named like `*mask*`
are all ones), and `text_calibration` tokenizes a text file, one sentence per line.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import UserInputError
from ..frontend.torch.inputs import _example_size
from ..ir import dtypes
from ..ir.dims import resolve_shape
from ..ir.dynamic_dims import DynamicDim
from ..ir.spec import DimRange, TensorSpec
from ..manifest import IOSpec
from ..runtime.model import check_inputs

Batch = dict[str, torch.Tensor]
TEXT_MAX_SEQ = 128  # cap for a dynamic seq dim when tokenizing text: calibration needs typical lengths, not the longest
_FORMATS = ("write batches with safetensors.torch.save_file({'input_ids': ..., 'attention_mask': ...}, 'calib.safetensors'), "
            "or with keys input_ids.0, attention_mask.0, input_ids.1, ... for several batches in one file")


@dataclass
class CalibrationSet:
    batches: list[Batch]  # each batch: every model input by name, validated
    description: str  # for the manifest, e.g. "calib.safetensors (8 batches)"
    synthetic: bool = False

    def split(self, held_out_fraction: float = 0.2) -> tuple[list[Batch], list[Batch]]:
        """(calibration, held_out): the last max(1, round(n * fraction)) batches are held out for the accuracy check.

        At least one batch is always left for calibration. With a single batch both lists hold it: the
        accuracy check then runs on the calibration data itself, which is weaker but better than nothing.
        """
        if not 0 <= held_out_fraction < 1:
            raise UserInputError(f"held-out fraction {held_out_fraction} is not in [0, 1)", "pass e.g. 0.2")
        n = len(self.batches)
        if n <= 1:
            return list(self.batches), list(self.batches)
        held = min(n - 1, max(1, round(n * held_out_fraction)))
        return self.batches[:n - held], self.batches[n - held:]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"


def _validate(batch: Batch, inputs: dict[str, TensorSpec], dims: dict[str, DimRange], where: str) -> Batch:
    """Checks one batch against the specs; errors say `where` (file and batch)."""
    expected = ", ".join(inputs)
    missing = [n for n in inputs if n not in batch]
    unexpected = [n for n in batch if n not in inputs]
    if missing or unexpected:
        found = "; ".join(s for s in (missing and f"missing {', '.join(missing)}",
                                      unexpected and f"unexpected {', '.join(unexpected)}") if s)
        raise UserInputError(f"{where}: {found}", f"each batch needs exactly the model inputs: {expected}")
    for name, t in batch.items():
        try:
            dtypes.to_name(t.dtype)
        except ValueError:  # a dtype the IR has no name for: check_inputs could not even compare it
            raise UserInputError(f"{where}: input {name} has dtype {t.dtype}, the model expects {inputs[name].dtype}",
                                 f"convert it first, e.g. tensor.to(torch.{inputs[name].dtype})") from None
    ordered = {n: batch[n] for n in inputs}
    try:
        check_inputs([IOSpec(name=n, spec=s) for n, s in inputs.items()], dims, list(ordered.values()))
    except UserInputError as e:
        raise UserInputError(f"{where}: {e.problem}", e.fix) from None
    return ordered


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise UserInputError(f"calibration file {path} is not a readable safetensors file ({e})", _FORMATS) from None
    if not tensors:
        raise UserInputError(f"calibration file {path} holds no tensors", _FORMATS)
    return tensors


def _split_keys(tensors: dict[str, torch.Tensor], names: list[str], path: Path) -> dict[int, Batch]:
    """File keys -> batches by index: plain input names (one batch) or `<name>.<N>` (several)."""
    if all(k in names for k in tensors):
        return {0: tensors}
    batches: dict[int, Batch] = {}
    plain = []
    for key, t in tensors.items():
        stem, _, index = key.rpartition(".")
        if stem and index.isascii() and index.isdigit():  # the index follows the last dot, so names may contain dots
            batches.setdefault(int(index), {})[stem] = t
        else:  # a plain name, or neither style (then reported as unexpected in batch 0)
            plain.append(key)
    if batches and any(k in names for k in plain):
        raise UserInputError(f"calibration file {path} mixes plain input names ({', '.join(k for k in plain if k in names)}) "
                             "with <name>.<N> keys", "use plain names for a single batch, or name.N keys for every tensor")
    for key in plain:
        batches.setdefault(0, {})[key] = tensors[key]
    return dict(sorted(batches.items()))


def load_calibration_files(path: str | Path, inputs: dict[str, TensorSpec], dims: dict[str, DimRange]) -> CalibrationSet:
    """Batches from a safetensors file or a folder of them (formats: see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.safetensors") if p.is_file())
        if not files:
            raise UserInputError(f"calibration folder {path} has no *.safetensors files", _FORMATS)
    elif path.is_file():
        files = [path]
    else:
        raise UserInputError(f"calibration data {path} does not exist", "pass a .safetensors file or a folder of them")
    names = list(inputs)
    batches = []
    for file in files:
        for index, batch in _split_keys(_read_safetensors(file), names, file).items():
            batches.append(_validate(batch, inputs, dims, f"calibration file {file} batch {index}"))
    if path.is_dir():
        description = f"{path.name}/ ({_plural(len(files), 'file')}, {_plural(len(batches), 'batch')})"
    else:
        description = f"{path.name} ({_plural(len(batches), 'batch')})"
    return CalibrationSet(batches, description)


def validated_set(batches: list[Batch], inputs: dict[str, TensorSpec], dims: dict[str, DimRange],
                  description: str) -> CalibrationSet:
    """Batches handed over in Python (optimize(calibration=[...])), checked like files are."""
    checked = []
    for i, batch in enumerate(batches):
        tensors = {k: torch.as_tensor(v) for k, v in batch.items()}
        checked.append(_validate(tensors, inputs, dims, f"calibration batch {i}"))
    return CalibrationSet(checked, f"{description} ({_plural(len(checked), 'batch')})")


def _is_mask(name: str) -> bool:
    return "mask" in name.lower()


def synthetic_calibration(count: int, inputs: dict[str, TensorSpec], dims: dict[str, DimRange],
                          int_high: int = 100, seed: int = 0) -> CalibrationSet:
    """`count` random batches following the specs; dynamic dims sized as for random example inputs."""
    if count <= 0:
        raise UserInputError(f"asked for {count} synthetic calibration batches", "ask for at least 1 (e.g. 16)")
    bound = {name: _example_size(DynamicDim(name, r.min, r.max)) for name, r in dims.items()}
    shapes = {}
    for name, spec in inputs.items():
        try:
            shapes[name] = resolve_shape(spec.shape, bound)
        except ValueError as e:
            raise UserInputError(f"cannot size synthetic input {name} {spec.describe()}: {e}",
                                 "give every named dim a range, or pass real data with --calib") from None
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for index in range(count):
        batch = {}
        for name, spec in inputs.items():
            dtype = dtypes.to_torch(spec.dtype)
            if dtype.is_floating_point:
                batch[name] = torch.randn(shapes[name], generator=generator).to(dtype)
            elif dtype == torch.bool or _is_mask(name):  # random 0/1 attention masks are nonsense: attend everywhere
                batch[name] = torch.ones(shapes[name], dtype=dtype)
            else:
                batch[name] = torch.randint(0, int_high, shapes[name], generator=generator, dtype=dtype)
        batches.append(_validate(batch, inputs, dims, f"synthetic batch {index}"))
    return CalibrationSet(batches, f"synthetic ({count} random {'batch' if count == 1 else 'batches'})", synthetic=True)


def _axis_range(name: str, spec: TensorSpec, axis: int, dims: dict[str, DimRange]) -> tuple[int, int]:
    dim = spec.shape[axis]
    if isinstance(dim, int):
        return dim, dim
    if dim in dims:
        return dims[dim].min, dims[dim].max
    raise UserInputError(f"input {name} {spec.describe()}: dim {axis} ({dim}) has no range to tokenize text for",
                         "pass tokenized batches in a safetensors file with --calib instead")


def text_calibration(path: str | Path, tokenizer, inputs: dict[str, TensorSpec], dims: dict[str, DimRange],
                     batch_size: int = 8) -> CalibrationSet:
    """Tokenized batches from a text file, one sentence per line (blank lines skipped).

    `tokenizer` is a Hugging Face tokenizer (transformers). Every input must be [batch, seq].
    Sequence length: the seq dim if static; if dynamic, its max capped at TEXT_MAX_SEQ (128), but
    at least its min. Every line is padded/truncated to that length.
    Batch size: `batch_size` clamped to the batch dim's range (so a static batch dim wins). If the
    last batch falls short of the smallest allowed batch, it is padded by repeating its lines.
    """
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"calibration text file {path} does not exist", "pass a text file with one sentence per line")
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as e:
        raise UserInputError(f"calibration text file {path} is not UTF-8 text ({e})", "save it as UTF-8") from None
    if not lines:
        raise UserInputError(f"calibration text file {path} has no sentences", "write one sentence per line")
    if batch_size <= 0:
        raise UserInputError(f"batch size {batch_size} for text calibration", "pass a positive batch size, e.g. 8")
    for name, spec in inputs.items():
        if spec.rank != 2:
            raise UserInputError(f"text calibration needs [batch, seq] inputs; input {name} is {spec.describe()}",
                                 "pass batches in a safetensors file with --calib instead")
    first, spec = next(iter(inputs.items()))
    seq_lo, seq_hi = _axis_range(first, spec, 1, dims)
    max_length = seq_hi if seq_lo == seq_hi else max(seq_lo, min(seq_hi, TEXT_MAX_SEQ))
    batch_lo, batch_hi = _axis_range(first, spec, 0, dims)
    size = max(batch_lo, min(batch_hi, batch_size))

    batches = []
    for start in range(0, len(lines), size):
        chunk = lines[start:start + size]
        chunk += [chunk[i % len(chunk)] for i in range(batch_lo - len(chunk))]  # too short for the batch dim: repeat lines
        encoded = tokenizer(chunk, padding="max_length", truncation=True, max_length=max_length, return_tensors="pt")
        absent = [n for n in inputs if n not in encoded]
        if absent:
            raise UserInputError(f"the tokenizer does not produce model input(s) {', '.join(absent)} "
                                 f"(it produces: {', '.join(encoded.keys())})",
                                 "use the model's own tokenizer, or pass tokenized batches in a safetensors file")
        batch = {n: encoded[n].to(dtypes.to_torch(s.dtype)) for n, s in inputs.items()}  # drop extras (token_type_ids)
        batches.append(_validate(batch, inputs, dims, f"{path} batch {len(batches)}"))
    return CalibrationSet(batches, f"{path.name} ({_plural(len(lines), 'line')}, tokenized)")
