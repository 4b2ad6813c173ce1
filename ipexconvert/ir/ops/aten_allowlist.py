"""The ATen ops an `aten` node may name, and the argument check each one runs before the op.

An artifact is untrusted, and being core ATen, pure and deterministic does not make an op safe on
hostile arguments: backward and private ops (`*_backward`, `_native_batch_norm_legit*`, `col2im`,
`_embedding_bag`) index memory with caller-supplied offsets or sizes, `empty*` hands back
uninitialised heap, `as_strided` reads anywhere, and any op that allocates allocates whatever it
is told. So an `aten` node may name only a target in ALLOWED: forward ops the frontend was seen to
emit for the built-in examples and the test models, and the slice/concat that passes add.

Grow the list on purpose: add an op when a model needs it, with a check for every argument that is
an index, a size or a count, and a case in tests/ir/test_aten_allowlist.py.

Each entry maps the target to a check, or to None where torch's own checks suffice and the output
is never larger than an input. A check gets the call's arguments by schema name (a dict) and the
byte budget, and raises Refused before the op runs. Checks look at shapes and scalar arguments only,
except the index checks, which read their index tensor's min and max (one pass over the indices).

Budget: no op output (for `expand`, the view it makes: what reads it walks every element) may be
larger than `max_tensor_bytes()`: MAX_TENSOR_BYTES (2 GiB) unless the environment variable
IPEXCONVERT_MAX_TENSOR_BYTES holds another number of bytes. It is read when a node is compiled, i.e.
when an artifact is loaded. Output sizes use the largest element size among the inputs where the
exact result dtype is not obvious: the budget is a guard against hostile sizes, not accounting.
"""
from __future__ import annotations

import math
import os
import weakref
from typing import Any, Callable, Optional, Sequence

import torch

from ... import environment
from ...errors import ArtifactError, UserInputError

MAX_TENSOR_BYTES = 2**31
MAX_TENSOR_BYTES_ENV = "IPEXCONVERT_MAX_TENSOR_BYTES"

_RECREATE = "re-create the artifact with `ipexconvert optimize`; this graph was not written by it or was edited"


def max_tensor_bytes() -> int:
    """The per-op output budget in bytes: IPEXCONVERT_MAX_TENSOR_BYTES if set, else MAX_TENSOR_BYTES."""
    text = (environment.get(MAX_TENSOR_BYTES_ENV) or "").strip()
    if not text:
        return MAX_TENSOR_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise UserInputError(f"{MAX_TENSOR_BYTES_ENV}={text!r} is not a positive number of bytes",
                             f"unset it (default {MAX_TENSOR_BYTES}) or give a whole number of bytes, e.g. 8589934592")
    return value


class Refused(Exception):
    """A call an aten node may not make; `error(target)` turns it into the project error."""

    def __init__(self, problem: str, kind: str = "argument"):
        super().__init__(problem)
        self.problem = problem
        self.kind = kind  # "argument" (the artifact's), "budget" or "index" (may be the inputs' fault)

    def error(self, target: str, budget: int):
        problem = f"{target}: {self.problem}"
        if self.kind == "budget":
            return ArtifactError(problem, f"if the model really makes tensors this large, raise {MAX_TENSOR_BYTES_ENV} "
                                          f"(now {budget} bytes); otherwise {_RECREATE}")
        if self.kind == "index":
            return UserInputError(problem, "check the input values (token ids below the vocabulary size, positions in "
                                           f"range); if they are right, {_RECREATE}")
        return ArtifactError(problem, _RECREATE)


Args = dict[str, Any]
Check = Callable[[Args, int], None]


# ---- helpers -------------------------------------------------------------------------------------------


def _tensor(a: Args, name: str) -> torch.Tensor:
    value = a.get(name)
    if not isinstance(value, torch.Tensor):
        raise Refused(f"argument {name} is a {type(value).__name__}, not a tensor")
    return value


def _int(value: Any, what: str) -> int:
    if type(value) is not int:  # bool is not a size
        raise Refused(f"{what} is {value!r}, not an integer")
    return value


def _ints(value: Any, what: str) -> list[int]:
    if type(value) is int:
        return [value]  # int[2] arguments accept one int for both
    if not isinstance(value, (list, tuple)):
        raise Refused(f"{what} is {value!r}, not a list of integers")
    return [_int(v, what) for v in value]


def _dim(dim: Any, rank: int, what: str = "dim") -> int:
    """A dimension index, normalised; rank 0 tensors accept -1 and 0 like torch does."""
    dim = _int(dim, what)
    bound = max(rank, 1)
    if not -bound <= dim < bound:
        raise Refused(f"{what} {dim} is out of range for a tensor with {rank} dims")
    return dim % bound


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > 2**63 or not math.isfinite(value):
        raise Refused(f"{what} is {str(value)[:40]}, not a finite number in int64 range")
    return value


def _itemsize(dtype: Any, default: int = 8) -> int:
    if dtype is None:
        return default
    if not isinstance(dtype, torch.dtype):
        raise Refused(f"dtype is {dtype!r}, not a dtype")
    return dtype.itemsize


def _fits(shape: Sequence[int], itemsize: int, budget: int, what: str = "the output") -> None:
    """Refuse negative sizes and an output over the budget, before anything is allocated."""
    if any(s < 0 for s in shape):
        raise Refused(f"{what} would have the negative size {list(shape)}")
    nbytes = math.prod(shape) * itemsize
    if nbytes > budget:
        raise Refused(f"{what} would have shape {list(shape)} ({nbytes} bytes), over the {budget}-byte limit per tensor",
                      "budget")


def _broadcast(shapes: Sequence[Sequence[int]]) -> list[int]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, size in enumerate(shape, start=rank - len(shape)):
            if size != 1:
                if out[i] not in (1, size):
                    raise Refused(f"shapes {[list(s) for s in shapes]} do not broadcast")
                out[i] = size
    return out


def _index_range(index: torch.Tensor, low: int, high: int, what: str) -> None:
    """Every index in [low, high); one min/max pass (skipped on meta tensors, which hold no values).

    On a GPU the pass reads two numbers back, which a CUDA graph being captured cannot do. A GPU index
    tensor checked before (the same tensor object, unchanged since: a constant or a value computed once per
    set of dims, which a captured graph reads as it is) passes during a capture without a read-back; any
    other one fails the capture, and those shapes run without a graph, checked on every call
    (backends/cuda/graphs.py). Replays run no Python: they only ever read indices checked this way."""
    if index.dtype not in (torch.int64, torch.int32):  # (uint8 would be a mask to aten.index)
        raise Refused(f"{what} has dtype {index.dtype}, not int64 or int32")
    if index.is_meta or index.numel() == 0:
        return
    if index.is_cuda and torch.cuda.is_current_stream_capturing():
        seen = _CHECKED_ON_GPU.get(id(index))
        if seen is not None and seen[0]() is index and seen[1:] == (_version(index), low, high):
            return
        raise Refused(f"{what} is computed from the inputs: it cannot be checked inside a CUDA graph")
    lo, hi = (int(v) for v in torch.aminmax(index))
    if lo < low or hi >= high:
        raise Refused(f"{what} holds values in {lo}..{hi}, outside {low}..{high - 1}", "index")
    if index.is_cuda:
        _CHECKED_ON_GPU[id(index)] = (weakref.ref(index, lambda _, key=id(index): _CHECKED_ON_GPU.pop(key, None)),
                                      _version(index), low, high)


def _version(t: torch.Tensor) -> Optional[int]:
    """t's in-place write counter; None for tensors made in inference mode, which keep none (the executor
    never writes into the values it keeps for a set of dims)."""
    try:
        return t._version
    except RuntimeError:
        return None


# id(GPU index tensor) -> (a weak reference to it, its version counter, the range it was found in), while it lives
_CHECKED_ON_GPU: dict[int, tuple] = {}


def forget_checked_indices(tensors) -> None:
    """Take these tensors off the checked list: they get new contents without a version bump (a CUDA
    graph's static input buffers, filled before each replay), so a capture must not trust an old check."""
    for t in tensors:
        seen = _CHECKED_ON_GPU.get(id(t))
        if seen is not None and seen[0]() is t:
            del _CHECKED_ON_GPU[id(t)]


# ---- checks --------------------------------------------------------------------------------------------


def broadcast_inputs(a: Args, budget: int) -> None:
    """Elementwise ops on several tensors: the broadcast result fits the budget."""
    tensors = [v for v in a.values() if isinstance(v, torch.Tensor)]
    if tensors:
        _fits(_broadcast([t.shape for t in tensors]), max(t.element_size() for t in tensors), budget)


def reduce_dims(a: Args, budget: int) -> None:
    """sum/mean/norm over dims: each dim names one of the input's (the output is never larger)."""
    x = _tensor(a, "self")
    dims = a.get("dim")
    for d in [] if dims is None else _ints(dims, "dim"):
        _dim(d, x.dim())
    dtype = a.get("dtype")
    if dtype is not None:
        _fits(x.shape, _itemsize(dtype), budget)


def one_dim(a: Args, budget: int) -> None:
    """cumsum and friends: a dim of the input, an optional output dtype."""
    x = _tensor(a, "self")
    _dim(a.get("dim"), x.dim())
    _fits(x.shape, _itemsize(a.get("dtype"), x.element_size()), budget)


def to_copy(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    _fits(x.shape, _itemsize(a.get("dtype"), x.element_size()), budget)


def full(a: Args, budget: int) -> None:
    _fits(_ints(a.get("size"), "size"), _itemsize(a.get("dtype")), budget)


def arange(a: Args, budget: int) -> None:
    start, end = _number(a.get("start", 0), "start"), _number(a.get("end"), "end")
    step = _number(a.get("step", 1), "step")
    if step == 0 or (end - start) * step < 0:
        raise Refused(f"arange({start}, {end}, {step}) has a step of the wrong sign or zero")
    _fits([math.ceil((end - start) / step)], _itemsize(a.get("dtype")), budget)


def expand(a: Args, budget: int) -> None:
    """The expanded view's size: -1 keeps an existing dim; new leading dims need a real size."""
    x = _tensor(a, "self")
    size = _ints(a.get("size"), "size")
    extra = len(size) - x.dim()
    if extra < 0:
        raise Refused(f"expand to {size} has fewer dims than the input's {list(x.shape)}")
    shape = []
    for i, s in enumerate(size):
        old = x.shape[i - extra] if i >= extra else None
        if s == -1 and old is not None:
            s = old
        if s < 0 or (old is not None and old not in (1, s)):
            raise Refused(f"cannot expand {list(x.shape)} to {size}")
        shape.append(s)
    _fits(shape, x.element_size(), budget, "the expanded view")


def repeat(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    repeats = _ints(a.get("repeats"), "repeats")
    if len(repeats) < x.dim() or any(r < 0 for r in repeats):
        raise Refused(f"repeats {repeats} do not cover the input's {x.dim()} dims with counts >= 0")
    shape = [1] * (len(repeats) - x.dim()) + list(x.shape)
    _fits([s * r for s, r in zip(shape, repeats)], x.element_size(), budget)


def view(a: Args, budget: int) -> None:
    """Sizes: >= 0 except a single -1, and the same number of elements."""
    x = _tensor(a, "self")
    size = _ints(a.get("size"), "size")
    if any(s < -1 for s in size) or size.count(-1) > 1:
        raise Refused(f"view size {size} has a negative size other than a single -1")
    known = math.prod(s for s in size if s != -1)
    if (x.numel() != known) if -1 not in size else (known == 0 or x.numel() % known):
        raise Refused(f"cannot view {list(x.shape)} ({x.numel()} elements) as {size}")


def slice_(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    _dim(a.get("dim", 0), x.dim())
    for name in ("start", "end"):
        if a.get(name) is not None:
            _int(a[name], name)
    if _int(a.get("step", 1), "step") <= 0:
        raise Refused(f"slice step {a.get('step')} is not positive")


def select(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    if x.dim() == 0:
        raise Refused("select on a 0-dim tensor")
    d = _dim(a.get("dim"), x.dim())
    index = _int(a.get("index"), "index")
    if not -x.shape[d] <= index < x.shape[d]:
        raise Refused(f"select index {index} is out of range for dim {d} of size {x.shape[d]}")


def unsqueeze(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    _dim(a.get("dim"), x.dim() + 1)


def squeeze_dims(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    for d in _ints(a.get("dim"), "dim"):
        _dim(d, x.dim())


def permute(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    dims = [_dim(d, x.dim()) for d in _ints(a.get("dims"), "dims")]
    if sorted(dims) != list(range(x.dim())):
        raise Refused(f"permute dims {a.get('dims')} are not a permutation of {x.dim()} dims")


def flip(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    dims = [_dim(d, x.dim()) for d in _ints(a.get("dims"), "dims")]
    if len(set(dims)) != len(dims):
        raise Refused(f"flip dims {a.get('dims')} name a dim twice")


def split_with_sizes(a: Args, budget: int) -> None:
    """Sizes >= 0 that add up to the split dim (the pieces are views of the input)."""
    x = _tensor(a, "self")
    d = _dim(a.get("dim", 0), x.dim())
    sizes = _ints(a.get("split_sizes"), "split_sizes")
    if x.dim() == 0 or any(s < 0 for s in sizes) or sum(sizes) != x.shape[d]:
        raise Refused(f"split sizes {sizes} do not add up to dim {d} of {list(x.shape)}")


def cat(a: Args, budget: int) -> None:
    """One rank for all, a dim of it, equal sizes elsewhere; the joined output fits the budget."""
    tensors = a.get("tensors")
    if not isinstance(tensors, list) or not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise Refused("cat needs a non-empty list of tensors")
    rank = tensors[0].dim()
    if any(t.dim() != rank for t in tensors) or rank == 0:
        raise Refused(f"cat of tensors with ranks {[t.dim() for t in tensors]} (one rank >= 1 for all)")
    d = _dim(a.get("dim", 0), rank)
    first = list(tensors[0].shape)
    for t in tensors[1:]:
        if [s for i, s in enumerate(t.shape) if i != d] != [s for i, s in enumerate(first) if i != d]:
            raise Refused(f"cat along dim {d} of shapes {[list(t.shape) for t in tensors]}")
    first[d] = sum(t.shape[d] for t in tensors)
    _fits(first, max(t.element_size() for t in tensors), budget)


def gather(a: Args, budget: int) -> None:
    x, index = _tensor(a, "self"), _tensor(a, "index")
    d = _dim(a.get("dim"), x.dim())
    if index.dim() != x.dim() and not (index.dim() <= 1 and x.dim() <= 1):
        raise Refused(f"gather index has {index.dim()} dims, the input {x.dim()}")
    _fits(index.shape, x.element_size(), budget)
    _index_range(index, 0, x.shape[d] if x.dim() else 1, "the gather index")


def index_select(a: Args, budget: int) -> None:
    x, index = _tensor(a, "self"), _tensor(a, "index")
    d = _dim(a.get("dim"), x.dim())
    if index.dim() > 1:
        raise Refused(f"index_select index has {index.dim()} dims (at most 1)")
    size = x.shape[d] if x.dim() else 1
    _fits([*x.shape[:d], index.numel(), *x.shape[d + 1:]], x.element_size(), budget)
    _index_range(index, 0, size, "the index_select index")


def index(a: Args, budget: int) -> None:
    """x[i0, i1, ...]: integer indices in range of the dim they index (negative counts from the end),
    bool masks shaped like the dims they cover; the broadcast index shape plus the dims no index
    covers fits the budget."""
    x = _tensor(a, "self")
    indices = a.get("indices")
    if not isinstance(indices, list) or not all(i is None or isinstance(i, torch.Tensor) for i in indices):
        raise Refused("indices must be a list of tensors or None")
    axis, shapes, kept = 0, [], []
    for n, i in enumerate(indices):
        covers = 1 if i is None or i.dtype != torch.bool else i.dim()
        if axis + covers > x.dim():
            raise Refused(f"{len(indices)} indices for a tensor of shape {list(x.shape)}")
        dims = list(x.shape[axis:axis + covers])
        if i is None:
            kept += dims
        elif i.dtype == torch.bool:
            if list(i.shape) != dims:
                raise Refused(f"bool index {n} of shape {list(i.shape)} does not match dims {dims} of {list(x.shape)}")
            shapes.append([i.numel()])  # at most every element is selected
        else:
            _index_range(i, -dims[0], dims[0], f"index {n}")
            shapes.append(list(i.shape))
        axis += covers
    kept += list(x.shape[axis:])
    _fits([*_broadcast(shapes), *kept], x.element_size(), budget)


def _pool_geometry(a: Args, budget: int, extra_itemsize: int) -> None:
    """kernel > 0, stride > 0, dilation > 0, 0 <= padding <= half the effective kernel; output fits."""
    x = _tensor(a, "self")
    if x.dim() not in (3, 4):
        raise Refused(f"pooling input has {x.dim()} dims (3 or 4)")

    def pair(name: str, default: list[int]) -> list[int]:
        value = _ints(a.get(name, default), name) or default
        if len(value) not in (1, 2):
            raise Refused(f"{name} {value} is not one or two integers")
        return value * 2 if len(value) == 1 else value

    kernel = pair("kernel_size", [])
    stride = pair("stride", kernel)
    padding = pair("padding", [0])
    dilation = pair("dilation", [1])
    if min(kernel) <= 0 or min(stride) <= 0 or min(dilation) <= 0:
        raise Refused(f"kernel {kernel}, stride {stride}, dilation {dilation} must be positive")
    effective = [dl * (k - 1) + 1 for k, dl in zip(kernel, dilation)]
    if any(p < 0 or p > e // 2 for p, e in zip(padding, effective)):
        raise Refused(f"padding {padding} is negative or over half the kernel {kernel}")
    out = []
    for size, e, s, p in zip(x.shape[-2:], effective, stride, padding):
        span = size + 2 * p - e
        if span < 0:
            raise Refused(f"the kernel {kernel} does not fit the padded input {list(x.shape)}")
        out.append((-(-span // s) if a.get("ceil_mode") else span // s) + 1)
    _fits([*x.shape[:-2], *out], x.element_size() + extra_itemsize, budget)


def max_pool2d_with_indices(a: Args, budget: int) -> None:
    _pool_geometry(a, budget, extra_itemsize=8)  # the int64 indices output


def avg_pool2d(a: Args, budget: int) -> None:
    if a.get("divisor_override") is not None and _int(a["divisor_override"], "divisor_override") <= 0:
        raise Refused(f"divisor_override {a['divisor_override']} is not positive")
    _pool_geometry(a, budget, extra_itemsize=0)


def adaptive_pool2d(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    size = _ints(a.get("output_size"), "output_size")
    if x.dim() not in (3, 4) or len(size) not in (1, 2) or min(size) <= 0:
        raise Refused(f"adaptive pooling of {list(x.shape)} to {size}")
    _fits([*x.shape[:-2], *(size * 2 if len(size) == 1 else size)], x.element_size(), budget)


def constant_pad_nd(a: Args, budget: int) -> None:
    x = _tensor(a, "self")
    pad = _ints(a.get("pad"), "pad")
    if len(pad) % 2 or len(pad) > 2 * x.dim():
        raise Refused(f"pad {pad} is not pairs for at most {x.dim()} dims")
    shape = list(x.shape)
    for i in range(len(pad) // 2):  # pairs start from the last dim
        shape[-1 - i] += pad[2 * i] + pad[2 * i + 1]
    _fits(shape, x.element_size(), budget)


def convolution(a: Args, budget: int) -> None:
    """N-d (transposed) convolution, the fallback of those the frontend keeps out of conv2d (conv1d/3d, transposed):
    geometry lists of one entry or one per spatial dim, positive strides/dilations/groups, channels that
    match the weight, and an output that fits the budget."""
    x, w = _tensor(a, "input"), _tensor(a, "weight")
    n = w.dim() - 2
    if n not in (1, 2, 3) or x.dim() != w.dim():
        raise Refused(f"convolution of input {list(x.shape)} with weight {list(w.shape)} (batched 1-3-d only)")

    def per_dim(name: str) -> list[int]:
        value = _ints(a.get(name), name)
        if len(value) not in (1, n):
            raise Refused(f"{name} {value} is not one integer or one per spatial dim ({n})")
        return value * n if len(value) == 1 else value

    stride, padding, dilation, output_padding = (per_dim(k) for k in ("stride", "padding", "dilation", "output_padding"))
    groups, transposed = _int(a.get("groups"), "groups"), a.get("transposed")
    if min(stride) <= 0 or min(dilation) <= 0 or groups <= 0 or min(padding) < 0 or min(output_padding) < 0:
        raise Refused(f"stride {stride}, dilation {dilation}, groups {groups} must be positive, padding {padding} "
                      f"and output_padding {output_padding} not negative")
    if transposed is not True and transposed is not False:
        raise Refused(f"transposed is {transposed!r}, not a bool")
    if transposed:
        in_channels, out_channels = w.shape[0], w.shape[1] * groups
        if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
            raise Refused(f"output_padding {output_padding} is not below the stride or dilation")
        spatial = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1
                   for i, s, p, d, k, op in zip(x.shape[2:], stride, padding, dilation, w.shape[2:], output_padding)]
    else:
        in_channels, out_channels = w.shape[1] * groups, w.shape[0]
        if any(output_padding):
            raise Refused(f"output_padding {output_padding} on a convolution that is not transposed")
        spatial = [(i + 2 * p - d * (k - 1) - 1) // s + 1
                   for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, w.shape[2:])]
    if x.shape[1] != in_channels or (transposed and w.shape[0] % groups) or (not transposed and out_channels % groups):
        raise Refused(f"input {list(x.shape)} does not match weight {list(w.shape)} with groups {groups}")
    bias = a.get("bias")
    if bias is not None and (not isinstance(bias, torch.Tensor) or list(bias.shape) != [out_channels]):
        raise Refused(f"bias is not a tensor of shape [{out_channels}]")
    if min(spatial) <= 0:
        raise Refused(f"the kernel {list(w.shape[2:])} does not fit the padded input {list(x.shape)}")
    _fits([x.shape[0], out_channels, *spatial], max(x.element_size(), w.element_size()), budget)


# ---- the list ------------------------------------------------------------------------------------------
# Found by converting example:tiny-cnn, tiny-bert, tiny-bert-eager, tiny-llama, minilm, bert-base and
# resnet50 in fp32, bf16 and int8 and the test models, collecting the targets of their aten nodes; plus
# what passes add (merge_shortcut_conv: cat, slice; merge_linears: slice). Elementwise ops whose
# output is an input's shape need no check; those that broadcast check the broadcast size.

ALLOWED: dict[str, Optional[Check]] = {
    # ---- seen: in the aten nodes of the built-in examples (fp32, bf16, int8), the test models, the passes
    "aten.arange.start_step": arange,
    "aten.full.default": full,
    "aten.scalar_tensor.default": None,
    "aten.clone.default": None,
    "aten.expand.default": expand,
    "aten.select.int": select,
    "aten.slice.Tensor": slice_,
    "aten.unsqueeze.default": unsqueeze,
    "aten.split_with_sizes.default": split_with_sizes,  # q, k, v = qkv.split(n, -1)
    "aten.flip.default": flip,
    "aten.cat.default": cat,
    "aten.gather.default": gather,
    "aten.index.Tensor": index,
    "aten.cumsum.default": one_dim,
    "aten.linalg_vector_norm.default": reduce_dims,
    "aten.mean.default": reduce_dims,
    "aten.mean.dim": reduce_dims,
    "aten.sum.dim_IntList": reduce_dims,
    "aten.max_pool2d_with_indices.default": max_pool2d_with_indices,  # ceil-mode max pooling
    "aten.abs.default": None,
    "aten.clamp.default": None,
    "aten.cos.default": None,
    "aten.exp.default": None,
    "aten.ge.Scalar": None,
    "aten.ne.Scalar": None,
    "aten.neg.default": None,
    "aten.pow.Tensor_Scalar": None,
    "aten.rsqrt.default": None,
    "aten.sin.default": None,
    "aten.add.Tensor": broadcast_inputs,  # add with alpha != 1
    "aten.bitwise_and.Tensor": broadcast_inputs,
    "aten.eq.Tensor": broadcast_inputs,
    "aten.le.Tensor": broadcast_inputs,
    "aten.where.self": broadcast_inputs,
    # ---- added on purpose: views the executor's view chains know, the calls of opset targets the frontend
    # leaves to the fallback (sub/mul/div with alpha or a scalar lhs, to() without a dtype, conv1d/3d and
    # transposed convolution), and common pure forward ops
    "aten.alias.default": None,
    "aten.squeeze.dim": squeeze_dims,
    "aten.squeeze.dims": squeeze_dims,
    "aten.permute.default": permute,
    "aten.view.default": view,
    "aten._to_copy.default": to_copy,
    "aten.convolution.default": convolution,
    "aten.sub.Tensor": broadcast_inputs,
    "aten.mul.Tensor": broadcast_inputs,
    "aten.div.Tensor": broadcast_inputs,
    "aten.constant_pad_nd.default": constant_pad_nd,
    "aten.repeat.default": repeat,
    "aten.index_select.default": index_select,
    "aten.amax.default": reduce_dims,
    "aten._adaptive_avg_pool2d.default": adaptive_pool2d,
    "aten.avg_pool2d.default": avg_pool2d,
    "aten.bitwise_not.default": None,
    "aten.eq.Scalar": None,
    "aten.gt.Scalar": None,
    "aten.le.Scalar": None,
    "aten.log.default": None,
    "aten.logical_not.default": None,
    "aten.lt.Scalar": None,
    "aten.reciprocal.default": None,
    "aten.sqrt.default": None,
    "aten.bitwise_or.Tensor": broadcast_inputs,
    "aten.ge.Tensor": broadcast_inputs,
    "aten.gt.Tensor": broadcast_inputs,
    "aten.logical_and.default": broadcast_inputs,
    "aten.lt.Tensor": broadcast_inputs,
    "aten.maximum.default": broadcast_inputs,
    "aten.minimum.default": broadcast_inputs,
    "aten.ne.Tensor": broadcast_inputs,
    # ONNX elementwise and reduction ops (frontend/onnx/ops/) that have no IR op of their own
    "aten.acos.default": None,
    "aten.acosh.default": None,
    "aten.asin.default": None,
    "aten.asinh.default": None,
    "aten.atan.default": None,
    "aten.atanh.default": None,
    "aten.ceil.default": None,
    "aten.cosh.default": None,
    "aten.elu.default": None,
    "aten.erf.default": None,
    "aten.expm1.default": None,
    "aten.floor.default": None,
    "aten.isinf.default": None,
    "aten.isnan.default": None,
    "aten.leaky_relu.default": None,
    "aten.log1p.default": None,
    "aten.round.default": None,
    "aten.sign.default": None,
    "aten.sinh.default": None,
    "aten.tan.default": None,
    "aten.full_like.default": to_copy,
    "aten.div.Tensor_mode": broadcast_inputs,
    "aten.fmod.Tensor": broadcast_inputs,
    "aten.remainder.Tensor": broadcast_inputs,
    "aten.pow.Tensor_Tensor": broadcast_inputs,
    "aten.logical_or.default": broadcast_inputs,
    "aten.logical_xor.default": broadcast_inputs,
    "aten.bitwise_xor.Tensor": broadcast_inputs,
    "aten.amin.default": reduce_dims,
    "aten.argmax.default": reduce_dims,
    "aten.argmin.default": reduce_dims,
    "aten.logsumexp.default": reduce_dims,
    "aten.prod.dim_int": reduce_dims,
    "aten._log_softmax.default": one_dim,
}
