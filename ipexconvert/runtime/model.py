"""LoadedModel: what load_artifact() returns. Checks inputs against the signature, then runs the plan."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..artifact import read_artifact, read_data
from ..backends import get_backend
from ..errors import ArtifactError, UserInputError
from ..ir import dtypes
from ..ir.dims import resolve
from ..ir.spec import DimRange
from ..manifest import IOSpec, Manifest
from .executor import Executor
from .kernels import NonFiniteInput, check_avoid
from .kernels import all_finite as _all_finite  # (module-level: tests count the scans through it)


class Signature:
    """Input/output names, specs and dim ranges, with the run-time checks they imply."""

    def __init__(self, manifest: Manifest, device: str = "cpu"):
        self.device = device  # where input tensors may live besides the CPU
        self.inputs: list[IOSpec] = manifest.inputs
        self.outputs: list[IOSpec] = manifest.outputs
        self.dims = manifest.dims
        self.input_names = [i.name for i in self.inputs]
        self.output_names = [o.name for o in self.outputs]
        self._expected = _Expected(self.inputs, self.dims, device)

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.spec.describe()}" for i in self.inputs)
        outs = ", ".join(f"{o.name}: {o.spec.describe()}" for o in self.outputs)
        return f"({ins}) -> ({outs})"

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        """Positional and keyword inputs -> tensors in graph order."""
        if len(args) + len(kwargs) != len(self.inputs):
            raise UserInputError(f"the model takes {len(self.inputs)} input(s) ({', '.join(self.input_names)}), "
                                 f"got {len(args) + len(kwargs)}", f"call it as model({', '.join(self.input_names)})")
        unknown = [k for k in kwargs if k not in self.input_names]
        if unknown:
            raise UserInputError(f"unknown input name(s) {', '.join(unknown)}", f"the inputs are: {', '.join(self.input_names)}")
        values = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k in values:
                raise UserInputError(f"input {k} given twice", "pass each input once, by position or by name")
            values[k] = v
        return [_as_tensor(name, values[name]) for name in self.input_names]

    def check(self, tensors: Sequence[torch.Tensor]) -> dict[str, int]:
        """Validate dtypes and shapes; returns the bound dynamic dims."""
        bound = self._expected.match(tensors)
        return bound if bound is not None else check_inputs(self.inputs, self.dims, tensors, self.device)


class _Expected:
    """The signature's checks compiled once: `match` answers for inputs that pass them all in one short loop (a decoder
    step hands over ~50 cache tensors, and its weights have just evicted everything else from the caches); anything
    it does not accept goes to check_inputs, which finds and explains the problem."""

    def __init__(self, inputs: Sequence[IOSpec], dims: dict[str, DimRange], device: str):
        self.devices = {"cpu", device}
        self.inputs = []  # (torch dtype, rank, fixed (axis, size), named (axis, name, min, max)) per input
        self.derived = []  # (input index, axis, expression) for sizes such as seq + 1
        for index, io in enumerate(inputs):
            fixed, named = [], []
            for axis, dim in enumerate(io.spec.shape):
                if isinstance(dim, int):
                    fixed.append((axis, dim))
                elif dim in dims:
                    named.append((axis, dim, dims[dim].min, dims[dim].max))
                else:
                    self.derived.append((index, axis, dim))
            self.inputs.append((dtypes.to_torch(io.spec.dtype), len(io.spec.shape), tuple(fixed), tuple(named)))

    def match(self, tensors: Sequence[Any]):
        """The bound dims when every input passes every check, else None."""
        if len(tensors) != len(self.inputs):
            return None
        bound: dict[str, int] = {}
        strided, devices = torch.strided, self.devices
        for (dtype, rank, fixed, named), t in zip(self.inputs, tensors):
            if (type(t) is not torch.Tensor or t.dtype != dtype or t.layout != strided or t.is_nested
                    or not (t.is_cpu or t.device.type in devices)):
                return None
            shape = t.shape
            if len(shape) != rank or any(shape[axis] != size for axis, size in fixed):
                return None
            for axis, name, low, high in named:
                size = shape[axis]
                if not low <= size <= high or bound.setdefault(name, size) != size:
                    return None
        for index, axis, expression in self.derived:
            try:
                if resolve(expression, bound) != tensors[index].shape[axis]:
                    return None
            except ValueError:  # names a dim no input binds on its own: nothing to check against
                continue
        return bound


def check_inputs(inputs: Sequence[IOSpec], dims: dict[str, DimRange], tensors: Sequence[torch.Tensor],
                 device: str = "cpu") -> dict[str, int]:
    """Validate dtypes and shapes of tensors (in the order of inputs) against their specs; returns the bound dynamic dims.
    Tensors may be on the CPU or on `device` (the model's).

    Shared by Signature.check and calibration-data loading (ipexconvert.quant.data)."""
    if len(tensors) != len(inputs):
        raise UserInputError(f"the model takes {len(inputs)} input(s) ({', '.join(i.name for i in inputs)}), got {len(tensors)}",
                             "pass one tensor per input, in the signature's order")
    bound: dict[str, int] = {}
    for io, t in zip(inputs, tensors):
        want = io.spec
        _check_plain_tensor(io.name, t, want.dtype, device)
        if dtypes.to_name(t.dtype) != want.dtype:
            raise UserInputError(f"input {io.name} has dtype {dtypes.to_name(t.dtype)}, the model expects {want.dtype}",
                                 f"convert it first, e.g. tensor.to(torch.{want.dtype})")
        if t.dim() != len(want.shape):
            raise UserInputError(f"input {io.name} has {t.dim()} dims {tuple(t.shape)}, the model expects "
                                 f"{len(want.shape)}: {want.describe()}", "reshape the input to the model's signature")
        for axis, (size, dim) in enumerate(zip(t.shape, want.shape)):
            if isinstance(dim, int):
                if size != dim:
                    raise UserInputError(f"input {io.name} dim {axis} is {size}, the model expects {dim} "
                                         f"({want.describe()})", "this dim is fixed; re-convert with a named dim to make it dynamic")
            elif dim in dims:
                rng = dims[dim]
                if not rng.min <= size <= rng.max:
                    raise UserInputError(f"input {io.name} dim {axis} ({dim}) is {size}, outside the range {rng.min}..{rng.max} "
                                         "the model was converted for", f"keep {dim} within {rng.min}..{rng.max}, or re-convert "
                                         f"with a wider range")
                if bound.setdefault(dim, size) != size:
                    raise UserInputError(f"dim {dim} is {bound[dim]} in one input and {size} in input {io.name}",
                                         "inputs that share a named dim must agree on its size")
    for io, t in zip(inputs, tensors):  # derived dims such as seq+1, once all names are bound
        for axis, (size, dim) in enumerate(zip(t.shape, io.spec.shape)):
            if isinstance(dim, str) and dim not in dims:
                try:
                    expected = resolve(dim, bound)
                except ValueError:  # names a dim no input binds on its own: nothing to check against
                    continue
                if expected != size:
                    raise UserInputError(f"input {io.name} dim {axis} is {size}, expected {dim} = {expected}",
                                         "make the input shapes consistent")
    return bound


def _check_plain_tensor(name: str, t: Any, want_dtype: str, device: str = "cpu") -> None:
    """A dense tensor of a dtype the IR names, on the CPU or the model's device: the kernels read its memory
    directly, so sparse, nested, mkldnn, quantized and meta tensors (no plain strided data) are refused here."""
    if not isinstance(t, torch.Tensor):
        raise UserInputError(f"input {name} is a {type(t).__name__}, not a tensor", "pass a torch.Tensor or numpy array")
    if t.is_nested:
        raise UserInputError(f"input {name} is a nested tensor", f"pass one dense {want_dtype} tensor (pad the sequences)")
    if t.layout != torch.strided:
        raise UserInputError(f"input {name} is a {str(t.layout).removeprefix('torch.')} tensor; the model takes dense tensors",
                             "convert it with tensor.to_dense()")
    if t.device.type not in ("cpu", device):
        fix = ("a meta tensor holds no data: pass a real tensor" if t.device.type == "meta"
               else "move it first: tensor.cpu()")
        where = "the CPU" if device == "cpu" else f"device {device} (inputs may also be on the CPU)"
        raise UserInputError(f"input {name} is on device {t.device}; the model runs on {where}", fix)
    if t.is_quantized:
        raise UserInputError(f"input {name} is a quantized tensor ({str(t.dtype).removeprefix('torch.')}); the model expects "
                             f"{want_dtype}", f"pass the float values: tensor.dequantize().to(torch.{want_dtype})")
    try:
        dtypes.to_name(t.dtype)
    except ValueError:
        raise UserInputError(f"input {name} has dtype {str(t.dtype).removeprefix('torch.')}, which ipexconvert does not take; "
                             f"the model expects {want_dtype}", f"convert it first, e.g. tensor.to(torch.{want_dtype})") from None


def _as_tensor(name: str, value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        try:
            return torch.from_numpy(np.ascontiguousarray(value))
        except (TypeError, ValueError) as e:  # object arrays, a byte order torch cannot take
            raise UserInputError(f"input {name} is a numpy array torch cannot read ({e})",
                                 "pass a numeric array in native byte order, e.g. array.astype(np.float32)") from None
    raise UserInputError(f"input {name} is a {type(value).__name__}", "pass a torch.Tensor or numpy array")


class LoadedModel:
    """A loaded artifact: call it like the original module (positional or keyword tensors)."""

    def __init__(self, path: str | Path, device: str | None = None, verify: bool = True, threads: int | None = None,
                 avoid_kernels: Sequence[str] = ()):
        """device: which backend runs it (backends/); None: the device the artifact was made for.
        avoid_kernels: kernel factories or families not to use (`ipexconvert doctor --kernels` lists them)."""
        backend = None if device is None else get_backend(device)  # an unknown device fails before any reading
        if threads is not None:
            if threads < 1:
                raise UserInputError(f"threads={threads} is not a thread count", "pass a positive number, or None for all cores")
            # Process-wide: torch's intra-op pool (and the native kernels, which follow it) use this.
            torch.set_num_threads(threads)
        start = time.perf_counter()
        self.path = Path(path)
        self.manifest, program = read_artifact(path, verify=verify)
        self.backend = backend or get_backend(self.manifest.target.device)
        self.backend.check_target(self.manifest.target, str(self.path))
        self.avoid_kernels = check_avoid(avoid_kernels, self.backend.device)
        self.backend.prepare_process()
        self.graph = program.graph
        self.signature = Signature(self.manifest, self.backend.device)
        self.device, self.verify = self.backend.device, verify
        # A decoder on a device that replays captured steps generates over static caches (runtime/static_cache.py),
        # a second plan sharing the first one's constants; static_cache_refusal says why not where the graph does
        # not allow it.
        static = self.manifest.decoder is not None and self.backend.static_decode
        placement = SharedPlacement(self.backend) if static else self.backend  # (dropped after the load)
        self.executor = self._build(program, backend=placement)
        self.runner = self.backend.make_runner(self.executor)  # the executor itself on the CPU
        self.static_cache, self.static_cache_refusal = None, None
        if static:
            self.static_cache, self.static_cache_refusal = self._static_cache(program, placement)
        self._decoder = None  # the generation loop of a decoder artifact, built on first use
        self._nan_safe = None  # a runner of NaN-safe kernels, built on the first call whose float inputs hold NaN or Inf
        # Float inputs are scanned for NaN/Inf on every call where that can change the answer: a plan with a
        # kernel that turns NaN into numbers, or layers computing on integer codes (a decoder's KV cache is
        # megabytes a token: never scanned for nothing).
        # An input whose only readers check it as they read it (Kernel.checked_fn) is not scanned here.
        self._computes_codes = any(n.op == "quantize" for n in self.graph.nodes)
        scans = self._computes_codes or not (self.backend.propagates_nan or self.executor.keeps_nan)
        if not scans:
            self.executor.drop_finite_checks()
        self._nan_scanned_inputs = [i for i, io in enumerate(self.signature.inputs)
                                    if scans and io.spec.dtype.startswith(("float", "bfloat"))
                                    and io.name not in self.executor.finite_checked_inputs]
        self.load_seconds = time.perf_counter() - start

    def _static_cache(self, program, placement):
        from .static_cache import build_static_cache

        return build_static_cache(program, self.manifest.decoder, self.backend,
                                  lambda static: self._build(static, backend=placement))

    def _build(self, program, nan_safe: bool = False, backend=None) -> Executor:
        try:
            return Executor(program, backend or self.backend, nan_safe=nan_safe, avoid_kernels=self.avoid_kernels)
        except ArtifactError as e:  # a node the runtime cannot build: say which file
            raise ArtifactError(f"{self.path}: {e.problem}", e.fix) from None

    def __call__(self, *args: Any, **kwargs: Any):
        outputs = self.run_list(self.signature.bind(args, kwargs))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run_list(self, tensors: Sequence[torch.Tensor], scan_nan: bool = True,
                 varying: frozenset[str] = frozenset()) -> list[torch.Tensor]:
        """scan_nan=False: the caller vouches that the float inputs hold no NaN/Inf it did not get from this model
        (a decoder's own caches), so the per-call scan is skipped.
        varying: the caller makes many calls whose dims differ only in these (a decoder's cache length): on the
        CPU they run from a plan bound to buffers made once (runtime/bound_plan.py), with the same results."""
        dims = self.signature.check(tensors)
        runner = self._runner_for(tensors) if scan_nan else self.runner
        with self.backend.call_context():  # the CPU: caller and OpenMP workers on different CPUs meanwhile
            try:
                if isinstance(runner, Executor):
                    return runner.run_bound(tensors, dims, varying) if varying else runner.run_fixed(tensors, dims)
                return runner.run(tensors, dims)
            except NonFiniteInput as e:  # an input the plan's first reader checks itself (Kernel.checked_fn)
                if runner is not self.runner:
                    raise
                return self._nonfinite_runner(e.name).run(tensors, dims)

    def _runner_for(self, tensors: Sequence[torch.Tensor]):
        """The plan for these inputs. Some fast CPU kernels (oneDNN's max pooling and fused relu) turn NaN
        into numbers, so inputs holding NaN or Inf (checked here, one pass over the float inputs) run
        a plan without them: NaN in gives NaN out, as in eager PyTorch. Integer codes cannot carry
        NaN, so an int8 artifact refuses such inputs instead of answering with plausible numbers. An input whose
        only readers check it as they read it (an image's first conversion, Kernel.checked_fn) is not scanned
        here: such a step raises NonFiniteInput, and run_list then does the same."""
        bad = next((i for i in self._nan_scanned_inputs if not _all_finite(tensors[i])), None)
        if bad is None:
            return self.runner
        return self._nonfinite_runner(self.signature.input_names[bad])

    def _nonfinite_runner(self, name: str):
        """The plan for inputs where input `name` holds NaN or Inf, or for an int8 artifact the refusal."""
        if self._computes_codes:
            raise UserInputError(f"input {name} holds NaN or Inf, which an int8 artifact cannot represent "
                                 "(its layers compute on integer codes)",
                                 "clean the input (torch.nan_to_num), or run the fp32/bf16 artifact, where NaN propagates")
        if self._nan_safe is None:
            self._nan_safe = self.backend.make_runner(self._build(self._reread(), nan_safe=True))
        return self._nan_safe

    def _reread(self):
        """The program again, for a second plan (the first one let go of the original weights); the
        file must be the one loaded."""
        manifest, program = read_artifact(self.path, verify=self.verify)
        if manifest.content_sha256 != self.manifest.content_sha256:
            raise ArtifactError(f"{self.path} changed since it was loaded (needed again for an input holding NaN/Inf)",
                                "load the artifact again")
        return program

    def run_dict(self, inputs: dict[str, Any], scan_nan: bool = True,
                 varying: frozenset[str] = frozenset()) -> dict[str, torch.Tensor]:
        outputs = self.run_list(self.signature.bind((), inputs), scan_nan, varying)
        return dict(zip(self.signature.output_names, outputs))

    def profile(self, inputs: dict[str, Any], outputs: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
        """Seconds per kernel kind for one run; the run's outputs by name go into `outputs` if given (a decoder's
        next step takes its caches: a step given an older cache copies it, which would be profiled too)."""
        tensors = self.signature.bind((), inputs)
        results: list = []
        totals = self.runner.profile(tensors, self.signature.check(tensors), outputs=results)
        if outputs is not None:
            outputs.update(zip(self.signature.output_names, results))
        return totals

    # ---- causal LMs ------------------------------------------------------------------------------------------------

    @property
    def decoder(self):
        """The generation loop of a decoder artifact (runtime/decoder.py); built on first use."""
        if self._decoder is None:
            from .decoder import Decoder

            record = self.manifest.decoder
            if record is None:
                raise UserInputError(f"{self.path.name} is not a decoder with a KV cache, so it cannot generate",
                                     "convert a causal LM (a Hugging Face *ForCausalLM folder, example:tiny-llama)")
            data = read_data(self.path, self.manifest.content_sha256) if record.tokenizer else {}
            if record.tokenizer and record.tokenizer not in data:
                raise ArtifactError(f"{self.path}: the manifest names tokenizer {record.tokenizer}, which the file "
                                    "does not hold", "re-create the artifact with `ipexconvert optimize`")
            self._decoder = Decoder(self, record, data.get(record.tokenizer) if record.tokenizer else None)
        return self._decoder

    def generate(self, prompt, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 seed: int | None = None, stop_at_eos: bool = True):
        """Continue a prompt (text, with a stored tokenizer, or token ids [n] / [batch, n]); returns a
        `Generation` (new ids, text, prefill seconds and decode ms per token). temperature 0 is greedy."""
        from .decoder import SamplingSettings

        return self.decoder.generate(prompt, SamplingSettings(max_new_tokens, temperature, top_k, top_p, seed, stop_at_eos))

    def stream(self, prompt, max_new_tokens: int = 64, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
               seed: int | None = None, stop_at_eos: bool = True):
        """Like generate(), yielding each step's new ids [batch] as soon as they are chosen."""
        from .decoder import SamplingSettings

        return self.decoder.stream(prompt, SamplingSettings(max_new_tokens, temperature, top_k, top_p, seed, stop_at_eos))

    def __repr__(self) -> str:
        return f"LoadedModel({self.path.name}, {self.manifest.dtype}, {self.signature})"


class SharedPlacement:
    """The backend, placing each constant once for every plan built from one program (the static-cache decode
    plan reads the same weights as the artifact's own plan: one copy on the device)."""

    def __init__(self, backend):
        self._backend = backend
        self._placed: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(original) -> (original, placed)

    def __getattr__(self, name: str):
        return getattr(self._backend, name)

    def place_constant(self, tensor: torch.Tensor, spec) -> torch.Tensor:
        entry = self._placed.get(id(tensor))
        if entry is None or entry[0] is not tensor:  # (the original is held: its id is not reused meanwhile)
            entry = (tensor, self._backend.place_constant(tensor, spec))
            self._placed[id(tensor)] = entry
        return entry[1]


