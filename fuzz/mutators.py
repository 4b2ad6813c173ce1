"""The mutators: each a small function fn(rng, parts) -> parts, registered by name in MUTATORS.

A mutator edits the Parts it is given (a private copy) and returns it, after `note(parts, ...)` says
what it did (the note goes into the finding's mutation chain). It raises Skip when it does not apply
(no aten node in this graph, ...); the driver then draws another mutator.

Groups (the prefix of each name): json_* (any key or value of the manifest or the graph), manifest_*,
dim_*, nodes_* / node_*, aten_*, post_ops, value_spec, graph_io, tensor_* (a tensor's header and bytes),
file_* (the container), metadata_*, and fixup_* (steps the driver appends so that a mutation survives the
loader's cross-checks: the manifest's signature re-derived from the graph, the constants' specs from the
tensor headers). Hostile values live in the tables below so they are easy to extend.
"""
from __future__ import annotations

import copy
import json
import math
import random
from typing import Any, Callable

import torch

from parts import EXAMPLE_PREFIX, HASH_FIELDS, IR_NAME_OF_CODE, TORCH_OF_CODE, Parts, TensorRec

MARKER = "IPXFUZZ_MARKER"  # a payload that runs creates this file in the case's working folder
SENTINEL = "IPXFUZZ"  # every code-shaped payload contains this; the child's audit hook flags compiling it


class Skip(Exception):
    """This mutator does not apply to these parts."""


Mutator = Callable[[random.Random, Parts], Parts]
MUTATORS: dict[str, Mutator] = {}
WEIGHTS: dict[str, float] = {}


def mutator(weight: float = 1.0):
    def register(fn: Mutator) -> Mutator:
        MUTATORS[fn.__name__] = fn
        WEIGHTS[fn.__name__] = weight
        return fn
    return register


def note(parts: Parts, text: str) -> None:
    parts.notes.append(text[:300])


# ---- hostile values ---------------------------------------------------------------------------------------------------

HOSTILE_INTS = [0, -1, 1, 2, 3, 7, 255, 256, -129, 2**15, 2**31 - 1, 2**31, -2**31, 2**32, 2**53 + 1, 2**62,
                2**63 - 1, 2**63, -2**63, 2**64, 10**30, -10**30, 2**1000]
HOSTILE_FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-45, -1.0, 3.4e38, 65504.0]
HOSTILE_STRINGS = ["", " ", "x", "\x00", "\ud800", "a\nb", "é" * 3, "../../etc/passwd", "A" * 100_000,
                   "aten.add.Tensor", "float32", "batch", "None", "{\"$in\": 0}"]
OTHER_TYPES: list[Any] = [None, True, False, 0, -1, 1.5, math.nan, "", "x", [], {}, [1], [[1]], {"a": 1}, {"$in": 0}]

DIM_EXPRESSIONS = [
    f"__import__('os').system('touch {MARKER}')",
    f"__import__('os').system('touch {MARKER}') or batch",
    f"exec(\"open('{MARKER}','w').close()\")",
    f"().__class__.__base__.__subclasses__()  # {SENTINEL}",
    f"lambda: {SENTINEL}",
    f"Symbol('{SENTINEL}')",
    "9**9**9**9", f"9**9**9**9*{SENTINEL}",
    "factorial(10**8)", f"factorial(10**8)*{SENTINEL}",
    "batch*" * 1000 + "batch",
    "(" * 1000 + "batch" + ")" * 1000,
    "batch**8**8", "batch**64", "batch**8", "2**62*batch", "2**63", "18446744073709551616", "99999999999999999999*batch",
    "batch//0", "batch%0", "Mod(batch, 0)", "FloorDiv(batch, 0)", "CeilDiv(batch, 0)", "floor(batch/0)", "batch/2",
    "batch-1000", "-batch", "0*batch", "batch*0", "Max(batch, 2**62)", "Min(batch, -1)", "Max()", "Min(batch)",
    "unknown_dim", "", " ", "batch seq", "batch.real", "batch[0]", "seq+1", "batch*seq", "2*seq", "batch*batch*batch",
    "sqrt(batch)", "oo", "zoo", "nan", "I", "E", "pi", "S(1)/0", "x" * 600, "\x00", "batch\n", "1e309", "-1", "0",
]

DTYPE_NAMES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool",
               "complex64", "float8_e4m3fn", "uint64", "object", "", "Float", "torch.float32", None, 1]
DTYPE_CODES = list(TORCH_OF_CODE) + ["F8_E4M3", "F8_E5M2", "C64", "U16", "U32", "U64", "I4", "f32", "", 3, None]
MEMORY_FORMATS = ["contiguous", "channels_last", "preserve_format", "channels_last_3d", "", None, 1]

# Op attrs worth a targeted value: attr name -> candidates (anything else gets generic hostile values).
ATTR_VALUES: dict[str, list[Any]] = {
    "stride": [[0, 0], [-1, -1], [2**31, 2**31], [1], [1, 1, 1], [2**63, 1], [1000, 1000]],
    "padding": [[-1, -1], [-100, 0], [2**31, 2**31], [100000, 100000], [1], [0, 0, 0], [64, 64]],
    "dilation": [[0, 0], [-1, -1], [2**31, 1], [100000, 100000], [40, 40]],
    "kernel_size": [[0, 0], [-1, -1], [100000, 100000], [2**31, 2**31], [1], [65, 65]],
    "groups": [0, -1, 2, 3, 7, 64, 2**31, 2**63],
    "output_size": [[0, 0], [-1, -1], [2**31, 2**31], [100000, 100000], [1], [65, 65]],
    "perm": [[0, 0, 1, 2], [0, 1, 2, 3, 4], [-1, 0, 1, 2], [100, 0, 1, 2], [3, 2, 1, 0], [], [0, 1]],
    "shape": [[-1, -1], [0], [2**62, 2**62], ["batch", -1, -1], [-2, 5], ["batch*seq*1000000"], [], [-1],
              ["batch", "seq", -1, 3], ["batch", 2**40]],
    "normalized_shape": [[0], [-1], [2**31], [64, 64], [63], [], [65], [2**62]],
    "eps": [math.nan, math.inf, -1.0, 0.0, -math.inf],
    "scale": [0.0, -1.0, math.nan, math.inf, 1e-45, 1e38, None],
    "zero_point": [-1, 256, -129, 127, 2**31, 2**63],
    "x_scale": [0.0, -1.0, math.nan, math.inf, 1e-45, 1e38],
    "output_scale": [0.0, -1.0, math.nan, math.inf, 1e-45, 1e38],
    "x_zero_point": [-1, 256, -129, 2**31, 2**63],
    "output_zero_point": [-1, 256, -129, 2**31, 2**63],
    "accum_scale": [0.0, math.nan, -1.0, 1e38],
    "accum_zero_point": [-1, 256, 2**31],
    "dtype": ["uint8", "int8", "float32", "bfloat16", "bool", "int64", "float64", "complex64", "nope"],
    "output_dtype": ["uint8", "int8", "float32", "bfloat16", "bool", "int64", "float16", "nope"],
    "memory_format": ["channels_last", "contiguous", "preserve_format", "x", None],
    "is_causal": [True, False],
    "enable_gqa": [True, False],
    "quantize": [None, {"scale": 0.0, "zero_point": 0, "dtype": "uint8"}, {"scale": 1.0, "zero_point": 300, "dtype": "int8"},
                 {"scale": math.nan, "zero_point": 0, "dtype": "uint8"}, {"scale": 1.0, "zero_point": 0, "dtype": "float32"}],
    "return_sum": [True, False],
    "lhs_scalar": [math.nan, 2**63, True, -1, 1e308],
    "rhs_scalar": [math.nan, 2**63, True, -1, 1e308],
    "dim": [-100, 100, 2**63, -1, 4],
    "ceil_mode": [True, False],
}

# ATen targets an artifact must never be able to run (raw memory, uninitialised memory, backward ops with
# caller-given sizes, data-dependent host syncs), plus ops that allocate or index with their arguments.
UNSAFE_ATEN = [
    "aten.as_strided.default", "aten.as_strided_copy.default", "aten.empty.memory_format", "aten.empty_strided.default",
    "aten.new_empty.default", "aten.new_empty_strided.default", "aten._local_scalar_dense.default",
    "aten.max_pool2d_with_indices_backward.default", "aten.embedding_dense_backward.default", "aten.col2im.default",
    "aten._embedding_bag.default", "aten._native_batch_norm_legit_no_training.default", "aten.index_put.default",
    "aten.index_put_.default", "aten.copy_.default", "aten.set_.source_Storage", "aten.resize_.default",
    "aten.bernoulli.default", "aten.rand.default", "aten.randn.default", "aten.native_dropout.default",
    "aten.scatter.src", "aten.scatter_add.default", "aten.unfold.default", "aten.take.default",
    "aten._unsafe_view.default", "aten.alias.default", "aten.view.dtype", "aten.lift_fresh_copy.default",
    "aten._assert_async.msg", "aten.sym_size.int", "aten.nonzero.default", "aten.masked_select.default",
    "aten.repeat_interleave.Tensor", "aten.full.default", "aten.arange.start_step", "aten.expand.default",
    "aten.index.Tensor", "aten.gather.default", "aten.index_select.default", "aten.select.int", "aten.slice.Tensor",
    "aten.constant_pad_nd.default", "aten.repeat.default", "aten.cat.default", "aten.convolution.default",
    "aten.max_pool2d_with_indices.default", "aten.avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
]
NONSENSE_TARGETS = ["aten.x", "os.system", "builtins.eval.default", "aten..", "aten.add.Tensor.extra", "aten.add",
                    "", "aten.__class__.__base__", f"{SENTINEL}.x.y", "aten.add.__call__", "torch.ops.aten.add.Tensor",
                    "prims.add.default", "quantized_decomposed.quantize_per_tensor.default"]

# Hostile argument lists for dangerous or allow-listed targets ({"$in": i} reads the node's i-th input).
X, Y = {"$in": 0}, {"$in": 1}
ATEN_TEMPLATES: dict[str, list[list[Any]]] = {
    "aten.as_strided.default": [[X, [1000000], [1]], [X, [1], [1], 2**40], [X, [4, 4], [2**40, 1]]],
    "aten.empty.memory_format": [[[16, 16]], [[2**40]], [[-1]]],
    "aten.empty_strided.default": [[[16], [1]]],
    "aten._local_scalar_dense.default": [[X]],
    "aten.max_pool2d_with_indices_backward.default": [[X, X, [2, 2], [1, 1], [0, 0], [1, 1], False, X]],
    "aten.embedding_dense_backward.default": [[X, Y, 2**20, -1, False]],
    "aten.col2im.default": [[X, [2**20, 2**20], [1, 1], [1, 1], [0, 0], [1, 1]]],
    "aten.index_select.default": [[X, 0, X], [X, 5, Y], [X, -100, Y]],
    "aten.gather.default": [[X, 0, Y], [X, 1, X], [X, 9, Y]],
    "aten.index.Tensor": [[X, [X]], [X, [Y]], [X, [None, Y]], [X, [Y, Y, Y, Y, Y]]],
    "aten.full.default": [[[2**20, 2**20], 1.0], [[-1], 0], [[2**62], 0], [[{"$sym": "batch*1000000000"}], 0.0]],
    "aten.arange.start_step": [[0, 2**62, 1], [0, 10, 0], [0, {"$sym": "batch*1000000000"}], [0, math.inf, 1],
                               [{"$float": "nan"}, 10, 1], [2**63 - 1, -2**63, -1]],
    "aten.expand.default": [[X, [2**31, 2**31]], [X, [-2, -1]], [X, [{"$sym": "batch*1000000000"}, -1]], [X, [1]]],
    "aten.slice.Tensor": [[X, 100, 0, 10], [X, 0, -2**63, 2**63 - 1, 0], [X, 0, 0, 10, -1], [X, -100, 0, 1],
                          [X, 0, 2**63 - 1, -2**63, 2**62]],
    "aten.select.int": [[X, 0, 2**40], [X, 5, 0], [X, 0, -2**40], [X, -9, 0]],
    "aten.cat.default": [[[X, X], 10], [[X, Y], 0], [[], 0], [[X] * 1000, 0]],
    "aten.repeat.default": [[X, [2**20, 2**20]], [X, [-1]], [X, [0]]],
    "aten.constant_pad_nd.default": [[X, [-1000, -1000]], [X, [2**30, 2**30]], [X, [1, 2, 3]], [X, [-2**62, 0]]],
    "aten.view.default": [[X, [-1, 7]], [X, [-1, -1]], [X, [2**62, 2**62]]],
    "aten.convolution.default": [[X, X, None, [0, 0], [0, 0], [1, 1], False, [0, 0], 1],
                                 [X, Y, None, [1, 1], [-5, -5], [1, 1], False, [0, 0], 1],
                                 [X, Y, None, [1, 1], [0, 0], [1, 1], True, [2**20, 2**20], 1]],
    "aten._embedding_bag.default": [[X, Y, Y]],
    "aten.unfold.default": [[X, 0, 2**31, 1], [X, 0, 1, 0]],
    "aten.squeeze.dims": [[X, [100]], [X, [-100]]],
    "aten.permute.default": [[X, [0, 0]], [X, [5, 6, 7]], []],
    "aten.cumsum.default": [[X, 10], [X, -10]],
    "aten.sum.dim_IntList": [[X, [10]], [X, [0, 0]]],
    "aten.mean.dim": [[X, [10]]],
    "aten.amax.default": [[X, [10]]],
    "aten._adaptive_avg_pool2d.default": [[X, [2**31, 2**31]], [X, [0, 0]], [X, [-1, -1]]],
    "aten.avg_pool2d.default": [[X, [0, 0]], [X, [2, 2], [0, 0]], [X, [2**31, 2**31]], [X, [3, 3], [1, 1], [5, 5]]],
    "aten.max_pool2d_with_indices.default": [[X, [100000, 100000]], [X, [2, 2], [0, 0]], [X, [3, 3], [1, 1], [9, 9]],
                                             [X, [2, 2], [2, 2], [0, 0], [0, 0], True]],
    "aten.scalar_tensor.default": [[math.nan], [2**63]],
    "aten._to_copy.default": [[X]],
    "aten.take.default": [[X, Y]],
    "aten.nonzero.default": [[X]],
    "aten.scatter.src": [[X, 0, Y, X]],
    "aten.clamp.default": [[X, math.nan, -math.inf]],
    "aten.pow.Tensor_Scalar": [[X, 2**63], [X, math.inf]],
}
ATEN_KWARGS: list[dict[str, Any]] = [
    {"dtype": {"$dtype": "complex64"}}, {"dtype": {"$dtype": "nope"}}, {"device": {"$device": "cuda"}},
    {"device": {"$device": "meta"}}, {"layout": {"$layout": "sparse_coo"}}, {"memory_format": {"$memory_format": "nope"}},
    {"out": X}, {"pin_memory": True}, {"$in": 0}, {"": 1}, {"dtype": {"$dtype": "float64"}},
]
TAGGED_ARGS: list[Any] = [
    {"$in": -1}, {"$in": 99}, {"$in": 2**63}, {"$in": "0"}, {"$in": 0.5}, {"$in": None}, {"$in": True},
    {"$sym": "batch*1000000000"}, {"$sym": "-batch"}, {"$sym": "batch//0"}, {"$sym": 5}, {"$sym": None},
    {"$dtype": "complex64"}, {"$dtype": "float8_e4m3fn"}, {"$device": "cuda"}, {"$device": "meta"},
    {"$layout": "sparse_coo"}, {"$layout": "x"}, {"$memory_format": "x"}, {"$float": "nan"}, {"$float": "1e999"},
    {"$float": "__import__('os')"}, {"$float": 3}, {"$unknown": 1}, {"$in": 0, "$sym": "batch"}, {}, {"$in": 0, "x": 1},
]
for _expr in DIM_EXPRESSIONS[:12]:
    TAGGED_ARGS.append({"$sym": _expr})


# ---- navigating JSON ----------------------------------------------------------------------------------------------


def _paths(obj: Any, skip_top: tuple[str, ...] = (), limit: int = 20000) -> list[tuple]:
    """Every path (tuple of keys/indices) to a value under obj, the root excluded."""
    out: list[tuple] = []
    stack: list[tuple[Any, tuple]] = [(obj, ())]
    while stack and len(out) < limit:
        item, path = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if not path and k in skip_top:
                    continue
                out.append(path + (k,))
                stack.append((v, path + (k,)))
        elif isinstance(item, list):
            for i, v in enumerate(item):
                out.append(path + (i,))
                stack.append((v, path + (i,)))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    _get(obj, path[:-1])[path[-1]] = value


def _json_target(rng: random.Random, parts: Parts) -> tuple[str, Any]:
    """The manifest or the graph (whichever is still a JSON container)."""
    options = [(name, obj) for name, obj in (("manifest", parts.manifest), ("graph", parts.graph))
               if isinstance(obj, (dict, list))]
    if not options:
        raise Skip("no JSON left to edit")
    return rng.choice(options)


def _random_path(rng: random.Random, parts: Parts) -> tuple[str, Any, tuple]:
    which, obj = _json_target(rng, parts)
    paths = _paths(obj, skip_top=HASH_FIELDS if which == "manifest" else ())
    if not paths:
        raise Skip("no path")
    return which, obj, rng.choice(paths)


def _nodes(parts: Parts) -> list[dict]:
    g = parts.graph
    if not isinstance(g, dict) or not isinstance(g.get("nodes"), list):
        raise Skip("graph has no node list")
    nodes = [n for n in g["nodes"] if isinstance(n, dict)]
    if not nodes:
        raise Skip("no nodes")
    return nodes


def _values(parts: Parts) -> dict:
    g = parts.graph
    if not isinstance(g, dict) or not isinstance(g.get("values"), dict):
        raise Skip("graph has no values")
    return g["values"]


def _value_names(parts: Parts) -> list[str]:
    return list(_values(parts))


def _hostile_like(rng: random.Random, value: Any) -> Any:
    """A hostile value of the same kind as `value` (most of the time), or of another kind."""
    if rng.random() < 0.15:
        return rng.choice(OTHER_TYPES)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice(HOSTILE_INTS + [value + 1, value - 1, value * 2, -value])
    if isinstance(value, float):
        return rng.choice(HOSTILE_FLOATS + [value * 2, -value])
    if isinstance(value, str):
        return rng.choice(HOSTILE_STRINGS + DIM_EXPRESSIONS[:8])
    if isinstance(value, list):
        if value and rng.random() < 0.6:
            out = list(value)
            i = rng.randrange(len(out))
            out[i] = _hostile_like(rng, out[i])
            return out
        return rng.choice([[], value + value[:1], value[:-1], value[::-1], [value], value * 50])
    if isinstance(value, dict):
        return rng.choice([{}, {**value, "extra": 1}, {k: None for k in value}])
    return rng.choice(OTHER_TYPES)


# ---- generic JSON mutators ---------------------------------------------------------------------------------------


@mutator()
def json_delete_key(rng, parts):
    """Delete a key (or list item) anywhere in the manifest or graph."""
    which, obj, path = _random_path(rng, parts)
    parent = _get(obj, path[:-1])
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    note(parts, f"{which}: delete {path}")
    return parts


@mutator()
def json_add_key(rng, parts):
    """Add an unknown key (extra fields are refused by the models) with a random value."""
    which, obj = _json_target(rng, parts)
    dicts = [()] + [p for p in _paths(obj) if isinstance(_get(obj, p), dict)]
    path = rng.choice(dicts)
    key = rng.choice(["extra", "__proto__", "$in", "", "name", "op", "inputs", "attrs", "target", "shape", SENTINEL])
    value = rng.choice(OTHER_TYPES)
    target = _get(obj, path)
    if key in target:
        key = key + "_x"
    target[key] = value
    note(parts, f"{which}: add key {key!r}={value!r} at {path}")
    return parts


@mutator()
def json_rename_key(rng, parts):
    """Rename a key (case, trailing underscore, empty, leading space)."""
    which, obj = _json_target(rng, parts)
    keyed = [p for p in _paths(obj, skip_top=HASH_FIELDS if which == "manifest" else ()) if isinstance(p[-1], str)]
    if not keyed:
        raise Skip("no keys")
    path = rng.choice(keyed)
    parent = _get(obj, path[:-1])
    new = rng.choice([path[-1].upper(), path[-1] + "_", "", " " + path[-1]])
    parent[new] = parent.pop(path[-1])
    note(parts, f"{which}: rename {path} -> {new!r}")
    return parts


@mutator()
def json_swap_values(rng, parts):
    """Swap two values at random paths of the manifest or graph."""
    which, obj = _json_target(rng, parts)
    paths = _paths(obj, skip_top=HASH_FIELDS if which == "manifest" else ())
    if len(paths) < 2:
        raise Skip("too few values")
    a, b = rng.sample(paths, 2)
    if a[:len(b)] == b or b[:len(a)] == a:
        raise Skip("nested paths")
    va, vb = _get(obj, a), _get(obj, b)
    _set(obj, a, vb)
    _set(obj, b, va)
    note(parts, f"{which}: swap {a} and {b}")
    return parts


@mutator(weight=2.0)
def json_replace_value(rng, parts):
    """Replace a value by a hostile one of the same kind (edge ints, NaN, odd strings) or another type."""
    which, obj, path = _random_path(rng, parts)
    new = _hostile_like(rng, _get(obj, path))
    _set(obj, path, new)
    note(parts, f"{which}: {path} = {new!r}"[:300])
    return parts


@mutator()
def json_replace_type(rng, parts):
    """Replace a value by a value of another JSON type."""
    which, obj, path = _random_path(rng, parts)
    new = rng.choice(OTHER_TYPES)
    _set(obj, path, new)
    note(parts, f"{which}: {path} = {new!r}")
    return parts


@mutator()
def json_edge_number(rng, parts):
    """Replace a number by a huge, negative, 2**63-ish or non-finite one."""
    which, obj = _json_target(rng, parts)
    numbers = [p for p in _paths(obj, skip_top=HASH_FIELDS if which == "manifest" else ())
               if isinstance(_get(obj, p), (int, float)) and not isinstance(_get(obj, p), bool)]
    if not numbers:
        raise Skip("no numbers")
    path = rng.choice(numbers)
    new = rng.choice(HOSTILE_INTS + HOSTILE_FLOATS)
    _set(obj, path, new)
    note(parts, f"{which}: {path} = {new!r}")
    return parts


@mutator()
def json_long_string(rng, parts):
    """Replace a string by a very long one, lone surrogates or NULs."""
    which, obj = _json_target(rng, parts)
    strings = [p for p in _paths(obj, skip_top=HASH_FIELDS if which == "manifest" else ()) if isinstance(_get(obj, p), str)]
    if not strings:
        raise Skip("no strings")
    path = rng.choice(strings)
    new = rng.choice(["A" * rng.choice([1000, 100_000, 2_000_000]), "\ud800" * 10, "\x00" * 10, "é" * 5000,
                      _get(obj, path) * 1000])
    _set(obj, path, new)
    note(parts, f"{which}: {path} = long string ({len(new)} chars)")
    return parts


@mutator(weight=0.7)
def json_deep_nesting(rng, parts):
    """Replace a value by deeply nested lists/objects (as raw text: json.dumps itself would recurse)."""
    which, obj, path = _random_path(rng, parts)
    depth = rng.choice([63, 64, 65, 100, 1000, 100_000])
    kind = rng.choice(["list", "dict"])
    raw = "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth
    token = f"\u0001{SENTINEL}-deep-{len(parts.raw)}"
    parts.raw[token] = raw
    _set(obj, path, token)
    note(parts, f"{which}: {path} = {kind} nested {depth} deep")
    return parts


@mutator()
def json_duplicate_list_item(rng, parts):
    """Duplicate an item of a list (nodes, inputs, shape entries, post-ops ...)."""
    which, obj = _json_target(rng, parts)
    lists = [p for p in _paths(obj, skip_top=HASH_FIELDS if which == "manifest" else ())
             if isinstance(_get(obj, p), list) and _get(obj, p)]
    if not lists:
        raise Skip("no lists")
    path = rng.choice(lists)
    items = _get(obj, path)
    i = rng.randrange(len(items))
    items.insert(rng.randrange(len(items) + 1), items[i] if not isinstance(items[i], (dict, list)) else
                 copy.deepcopy(items[i]))
    note(parts, f"{which}: duplicate item {i} of {path}")
    return parts


@mutator(weight=0.5)
def json_text_duplicate_key(rng, parts):
    """A top-level key given twice (json.loads keeps the last): a bogus copy in front of the real one."""
    which, obj = _json_target(rng, parts)
    if not isinstance(obj, dict) or not obj:
        raise Skip("not an object")
    key = rng.choice(list(obj))
    bogus = rng.choice(OTHER_TYPES)
    token = f"\u0001{SENTINEL}-dup-{len(parts.raw)}"
    # {token: 0, ...} is written as {"key": bogus, "key": 0, ..., "key": real}
    parts.raw[token] = f"{json.dumps(key)}: {json.dumps(bogus)}, {json.dumps(key)}"
    new = {token: 0}
    new.update(obj)
    obj.clear()
    obj.update(new)
    note(parts, f"{which}: key {key!r} given twice before its real value, first as {bogus!r}")
    return parts


# ---- manifest ----------------------------------------------------------------------------------------------------


def _manifest(parts: Parts) -> dict:
    if not isinstance(parts.manifest, dict):
        raise Skip("manifest is not an object")
    return parts.manifest


@mutator()
def manifest_format_version(rng, parts):
    """format_version: older, newer, negative, huge, a string, a float, null."""
    m = _manifest(parts)
    m["format_version"] = rng.choice([0, 1, 3, 99, -1, 2**63, "2", 2.0, None, True])
    note(parts, f"manifest: format_version = {m['format_version']!r}")
    return parts


@mutator()
def manifest_fields(rng, parts):
    """A manifest field (dtype, target, the older device / prepack_isa, passes, accuracy, ...) set to an odd value."""
    m = _manifest(parts)
    key, choices = rng.choice([
        ("dtype", ["fp32", "bf16", "int8", "fp16", "", None]),
        ("device", ["cpu", "xpu", "cuda", "", None]),
        ("target", [{"device": "cpu"}, {"device": "cpu", "level": "amx"}, {"device": "cpu", "level": "avx9"},
                    {"device": "cuda"}, {"device": "cpu", "level": None}, "cpu", None, []]),
        ("prepack_isa", [None, "avx512_core_amx", "avx2", "avx512_core_vnni", "garbage", "", 5]),
        ("format", ["ipexconvert", "safetensors", ""]),
        ("op_histogram", [{}, {"aten:x": -1}, {"conv2d": 2**63}, []]),
        ("fallback_ops", [[], ["aten.as_strided.default"], [None]]),
        ("passes", [[], [{"name": "x", "changes": {"a": "b"}}], [{"name": "prepack", "changes": {"n": 2**63}}]]),
        ("accuracy", [None, {}, {"reference": "x", "dtype": "fp32", "budget_rel_error": math.nan,
                                 "budget_min_cosine": math.inf, "passed": True, "outputs": []}]),
        ("source", [{}, {"kind": "x", "location": "\x00"}, None]),
        ("created_at", ["", "\ud800", "x" * 100000]),
    ])
    m[key] = rng.choice(choices)
    note(parts, f"manifest: {key} = {m[key]!r}"[:300])
    return parts


@mutator()
def manifest_quantization(rng, parts):
    """The quantization record is a free-form dict that `inspect` reads key by key."""
    m = _manifest(parts)
    q = m.get("quantization")
    paths = _paths(q) if isinstance(q, dict) else []
    if not paths:  # absent, not a dict, or an empty one: replace it whole
        m["quantization"] = rng.choice([{}, {"layers": {}}, {"layers": []}, {"layers": {"a": {}}}, "x", [1]])
        note(parts, f"manifest: quantization = {m['quantization']!r}")
        return parts
    path = rng.choice(paths)
    action = rng.choice(["delete", "value", "type"])
    if action == "delete":
        parent = _get(q, path[:-1])
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        _set(q, path, _hostile_like(rng, _get(q, path)) if action == "value" else rng.choice(OTHER_TYPES))
    note(parts, f"manifest: quantization {action} at {path}")
    return parts


@mutator(weight=0.7)
def manifest_hash_fields(rng, parts):
    """Edit the hash fields after re-hashing (the integrity layer)."""
    field_name = rng.choice(HASH_FIELDS)

    def edit(m: dict, field_name=field_name, pick=rng.random(), choice=rng.randrange(8)):
        value = m.get(field_name)
        if field_name == "tensor_sha256" and isinstance(value, dict) and value:
            names = sorted(value)
            name = names[int(pick * len(names))]
            if choice % 4 == 0:
                del value[name]
            elif choice % 4 == 1:
                value[name] = value[name].upper()
            elif choice % 4 == 2:
                value["stray"] = value[name]
            else:
                value[name] = 5
            return
        m[field_name] = [value.upper() if isinstance(value, str) else value, "", None, 0, "0" * 64, "g" * 64,
                         (value or "") + "00", [value]][choice]
    parts.after_rehash.append(edit)
    note(parts, f"manifest: edit {field_name} after hashing")
    return parts


# ---- dims ----------------------------------------------------------------------------------------------------------


def _dim_sites(parts: Parts) -> list[tuple[Any, tuple]]:
    """(root, path) of every symbolic shape entry: value specs, manifest IO specs, reshape attrs, $sym payloads."""
    sites: list[tuple[Any, tuple]] = []
    for root in (parts.graph, parts.manifest):
        if not isinstance(root, (dict, list)):
            continue
        for p in _paths(root, skip_top=HASH_FIELDS):
            v = _get(root, p)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and len(p) >= 2 and \
                    (p[-2] == "shape" or p[-1] == "$sym"):
                sites.append((root, p))
    return sites


@mutator(weight=3.0)
def dim_expression(rng, parts):
    """A shape entry or $sym argument replaced by a hostile/odd dim expression (code, huge powers, x/0)."""
    sites = _dim_sites(parts)
    if not sites:
        raise Skip("no shape entries")
    symbolic = [s for s in sites if isinstance(_get(*s), str)]
    root, path = rng.choice(symbolic if symbolic and rng.random() < 0.7 else sites)
    expr = rng.choice(DIM_EXPRESSIONS)
    _set(root, path, expr)
    where = "graph" if root is parts.graph else "manifest"
    note(parts, f"{where}: {path} = {expr[:80]!r}")
    return parts


@mutator(weight=2.0)
def dim_expression_everywhere(rng, parts):
    """Replace one dim name by an expression everywhere it appears on its own (keeps manifest and graph in step)."""
    sites = [s for s in _dim_sites(parts) if isinstance(_get(*s), str)]
    if not sites:
        raise Skip("no symbolic entries")
    name = _get(*rng.choice(sites))
    expr = rng.choice(DIM_EXPRESSIONS + [f"{name}*{name}", f"{name}+1", f"{name}-1", f"2*{name}", f"{name}//2",
                                         f"{name}*1000000", f"Max({name}, 100000)"])
    for root, path in sites:
        if _get(root, path) == name:
            _set(root, path, expr)
    note(parts, f"dim {name!r} -> {expr[:80]!r} everywhere")
    return parts


def _dims_tables(parts: Parts) -> list[dict]:
    tables = [obj["dims"] for obj in (parts.graph, parts.manifest) if isinstance(obj, dict) and isinstance(obj.get("dims"), dict)]
    if not tables:
        raise Skip("no dims")
    return tables


@mutator(weight=1.5)
def dim_range(rng, parts):
    """A dynamic dim's range: huge, negative, min > max, non-int; in both manifest and graph or one."""
    tables = _dims_tables(parts)
    names = sorted({k for t in tables for k in t})
    if not names:
        raise Skip("no dynamic dims")
    name = rng.choice(names)
    lo, hi = rng.choice([(0, 0), (0, 1), (1, 2**62), (1, 2**63), (-1, 10), (10, 1), (1, 10**6), (5, 5), (0, 2**31),
                         (-2**63, 2**63), (1, math.inf), (1.5, 3), ("1", "2"), (None, None), (2, 100000)])
    both = rng.random() < 0.7
    for t in (tables if both else [rng.choice(tables)]):
        t[name] = {"min": lo, "max": hi}
    note(parts, f"dims[{name}] = {lo}..{hi} in {'both' if both else 'one of manifest/graph'}")
    return parts


@mutator(weight=0.7)
def dim_rename(rng, parts):
    """Rename a dynamic dim in the dims tables only (its uses keep the old name)."""
    tables = _dims_tables(parts)
    names = sorted({k for t in tables for k in t})
    if not names:
        raise Skip("no dynamic dims")
    old = rng.choice(names)
    new = rng.choice(["B", "seq", "batch", "", "x" * 600, "__import__", "1batch", "batch-1", f"{SENTINEL}"])
    for t in tables:
        if old in t:
            t[new] = t.pop(old)
    note(parts, f"dims key {old!r} renamed {new!r} (uses unchanged)")
    return parts


# ---- nodes -----------------------------------------------------------------------------------------------------------


@mutator(weight=1.5)
def nodes_swap(rng, parts):
    """Swap two nodes (breaks topological order)."""
    nodes = parts.graph["nodes"] if isinstance(parts.graph, dict) else None
    _nodes(parts)
    if len(nodes) < 2:
        raise Skip("one node")
    i, j = rng.sample(range(len(nodes)), 2)
    nodes[i], nodes[j] = nodes[j], nodes[i]
    note(parts, f"swap nodes {i} and {j}")
    return parts


@mutator(weight=1.5)
def nodes_drop(rng, parts):
    """Remove a node (dangling readers, missing outputs)."""
    _nodes(parts)
    nodes = parts.graph["nodes"]
    i = rng.randrange(len(nodes))
    removed = nodes.pop(i)
    note(parts, f"drop node {i} ({removed.get('name') if isinstance(removed, dict) else removed!r})")
    return parts


@mutator()
def nodes_duplicate(rng, parts):
    """Duplicate a node: same name and outputs, or renamed with or without fresh outputs."""
    _nodes(parts)
    nodes = parts.graph["nodes"]
    i = rng.randrange(len(nodes))
    dup = copy.deepcopy(nodes[i])
    mode = rng.choice(["same", "renamed", "renamed-same-outputs"])
    if mode != "same" and isinstance(dup, dict):
        dup["name"] = f"{dup.get('name')}_dup"
        if mode == "renamed":
            values = _values(parts)
            outs = []
            for o in dup.get("outputs") or []:
                if isinstance(o, str):
                    values[o + "_dup"] = copy.deepcopy(values.get(o))
                    outs.append(o + "_dup")
            dup["outputs"] = outs
    nodes.insert(rng.randrange(len(nodes) + 1), dup)
    note(parts, f"duplicate node {i} ({mode})")
    return parts


@mutator(weight=0.5)
def nodes_shuffle(rng, parts):
    """Shuffle or reverse a run of 2-8 nodes."""
    _nodes(parts)
    nodes = parts.graph["nodes"]
    a = rng.randrange(len(nodes))
    b = min(len(nodes), a + rng.randint(2, 8))
    chunk = nodes[a:b]
    rng.shuffle(chunk) if rng.random() < 0.5 else chunk.reverse()
    nodes[a:b] = chunk
    note(parts, f"shuffle nodes {a}..{b}")
    return parts


def _some_value_name(rng: random.Random, parts: Parts, node: dict | None = None) -> Any:
    names = _value_names(parts)
    choices: list[Any] = ["IPXFUZZ_nowhere", None, "", 0]
    if node is not None:
        choices += [o for o in node.get("outputs") or [] if isinstance(o, str)]
    r = rng.random()
    if r < 0.75 and names:
        return rng.choice(names)
    return rng.choice(choices)


@mutator(weight=2.5)
def node_rewire_input(rng, parts):
    """A node input -> another value (constant, later output, its own output), unknown name or null."""
    node = rng.choice([n for n in _nodes(parts) if n.get("inputs")] or _nodes(parts))
    ins = node.get("inputs")
    if not isinstance(ins, list) or not ins:
        raise Skip("node without inputs")
    i = rng.randrange(len(ins))
    ins[i] = _some_value_name(rng, parts, node)
    note(parts, f"node {node.get('name')}: input {i} = {ins[i]!r}")
    return parts


@mutator(weight=1.5)
def node_rewire_output(rng, parts):
    """A node output -> an existing value, a graph input, a constant, an unknown name or null."""
    node = rng.choice(_nodes(parts))
    outs = node.get("outputs")
    if not isinstance(outs, list) or not outs:
        raise Skip("node without outputs")
    i = rng.randrange(len(outs))
    g = parts.graph
    choices = list(_value_names(parts)) + ["IPXFUZZ_new", None, ""]
    if isinstance(g.get("inputs"), list):
        choices += g["inputs"]
    if isinstance(g.get("constants"), list):
        choices += g["constants"][:5]
    outs[i] = rng.choice(choices)
    note(parts, f"node {node.get('name')}: output {i} = {outs[i]!r}")
    return parts


@mutator(weight=1.5)
def node_arity(rng, parts):
    """Drop a node input/output or add an extra one."""
    node = rng.choice(_nodes(parts))
    key = rng.choice(["inputs", "outputs"])
    items = node.get(key)
    if not isinstance(items, list):
        raise Skip("no list")
    if items and rng.random() < 0.5:
        items.pop(rng.randrange(len(items)))
        note(parts, f"node {node.get('name')}: drop one of its {key}")
    else:
        new = _some_value_name(rng, parts) if key == "inputs" else rng.choice(_value_names(parts) + ["IPXFUZZ_extra"])
        items.insert(rng.randrange(len(items) + 1), new)
        note(parts, f"node {node.get('name')}: extra {key[:-1]} {new!r}")
    return parts


def _opset_names() -> list[str]:
    import ipexconvert.ir.ops  # noqa: F401  (registers the ops)
    from ipexconvert.ir.opdef import OPSET
    return sorted(OPSET)


@mutator(weight=1.5)
def node_change_op(rng, parts):
    """A node's op -> another opset op (attrs unchanged) or an unknown name."""
    node = rng.choice(_nodes(parts))
    new = rng.choice(_opset_names() + ["nope", "", "Aten", "aten ", SENTINEL, None])
    old, node["op"] = node.get("op"), new
    note(parts, f"node {node.get('name')}: op {old} -> {new}")
    return parts


# Donor attrs per op, from every seed's graph (set by the driver): a node can become another op with attrs
# that validate, so the kernel itself meets inputs it was not built for.
LIBRARY: dict[str, list[dict]] = {}


def set_library(graphs: list[dict]) -> None:
    LIBRARY.clear()
    for g in graphs:
        for n in g.get("nodes", []):
            LIBRARY.setdefault(n["op"], []).append({"attrs": n.get("attrs", {}), "arity": len(n.get("inputs", [])),
                                                    "outputs": len(n.get("outputs", []))})


@mutator(weight=2.5)
def node_transplant(rng, parts):
    """Give a node another op with valid attrs from a real node of that op (any seed); fix the arity."""
    if not LIBRARY:
        raise Skip("no library")
    node = rng.choice(_nodes(parts))
    op = rng.choice(sorted(LIBRARY))
    donor = rng.choice(LIBRARY[op])
    node["op"], node["attrs"] = op, copy.deepcopy(donor["attrs"])
    ins = node.get("inputs") if isinstance(node.get("inputs"), list) else []
    names = _value_names(parts)
    while len(ins) < donor["arity"] and names:
        ins.append(rng.choice(names))
    del ins[donor["arity"]:]
    node["inputs"] = ins
    note(parts, f"node {node.get('name')}: now {op} with attrs {str(donor['attrs'])[:150]}")
    return parts


@mutator(weight=3.0)
def node_attr(rng, parts):
    """An op attr set to a hostile value (stride 0, negative padding, huge kernel, NaN scale, bad dtype ...)."""
    nodes = [n for n in _nodes(parts) if isinstance(n.get("attrs"), dict) and n["attrs"]]
    if not nodes:
        raise Skip("no attrs")
    node = rng.choice(nodes)
    attrs = node["attrs"]
    if node.get("op") == "aten" and rng.random() < 0.7:
        raise Skip("aten attrs are aten_args' job")
    key = rng.choice(sorted(attrs))
    if key in ATTR_VALUES and rng.random() < 0.75:
        value = rng.choice(ATTR_VALUES[key])
    else:
        value = _hostile_like(rng, attrs[key])
    attrs[key] = value
    note(parts, f"node {node.get('name')} ({node.get('op')}): {key} = {value!r}"[:300])
    return parts


@mutator()
def node_attr_extra(rng, parts):
    """Add an attr the op does not have, or drop one it needs."""
    node = rng.choice(_nodes(parts))
    attrs = node.setdefault("attrs", {})
    if not isinstance(attrs, dict):
        raise Skip("attrs not a dict")
    if attrs and rng.random() < 0.5:
        key = rng.choice(sorted(attrs))
        del attrs[key]
        note(parts, f"node {node.get('name')}: drop attr {key}")
    else:
        key = rng.choice(sorted(ATTR_VALUES) + ["bogus", "target", "args", "post_ops"])
        attrs[key] = rng.choice(ATTR_VALUES.get(key, OTHER_TYPES))
        note(parts, f"node {node.get('name')}: add attr {key} = {attrs[key]!r}")
    return parts


# ---- aten nodes -------------------------------------------------------------------------------------------------------

_ALL_ATEN: list[str] = []


def all_aten_targets() -> list[str]:
    """Every overload in torch.ops.aten as 'aten.<op>.<overload>' (computed once)."""
    if not _ALL_ATEN:
        for name in sorted(dir(torch.ops.aten)):
            packet = getattr(torch.ops.aten, name, None)
            if isinstance(packet, torch._ops.OpOverloadPacket):
                _ALL_ATEN.extend(f"aten.{name}.{o}" for o in sorted(packet.overloads()))
    return _ALL_ATEN


def allowed_targets() -> list[str]:
    try:
        from ipexconvert.ir.ops.aten_allowlist import ALLOWED
        return sorted(ALLOWED)
    except ImportError:
        return []


def _aten_nodes(parts: Parts) -> list[dict]:
    nodes = [n for n in _nodes(parts) if n.get("op") == "aten" and isinstance(n.get("attrs"), dict)]
    if not nodes:
        raise Skip("no aten nodes")
    return nodes


def _pick_target(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return rng.choice(UNSAFE_ATEN)
    if r < 0.6:
        return rng.choice(allowed_targets() or UNSAFE_ATEN)
    if r < 0.9:
        return rng.choice(all_aten_targets())
    return rng.choice(NONSENSE_TARGETS)


@mutator(weight=2.0)
def aten_target(rng, parts):
    """An aten node's target -> an unsafe op, an allow-listed op, any torch.ops.aten overload, or nonsense."""
    node = rng.choice(_aten_nodes(parts))
    node["attrs"]["target"] = target = _pick_target(rng)
    note(parts, f"node {node.get('name')}: aten target -> {target}")
    return parts


@mutator(weight=3.0)
def aten_args(rng, parts):
    """An aten node's args/kwargs: hostile values, bad $in/$sym/$dtype/... tags, extra or missing args."""
    node = rng.choice(_aten_nodes(parts))
    attrs = node["attrs"]
    args = attrs.get("args")
    if not isinstance(args, list):
        args = attrs["args"] = []
    action = rng.choice(["value", "tagged", "append", "drop", "kwargs", "sym"])
    if action == "kwargs" or (action != "append" and not args):
        kw = attrs.setdefault("kwargs", {})
        if isinstance(kw, dict):
            kw.update(rng.choice(ATEN_KWARGS))
        note(parts, f"node {node.get('name')}: kwargs = {attrs.get('kwargs')!r}"[:300])
        return parts
    if action == "append":
        args.append(rng.choice(OTHER_TYPES + TAGGED_ARGS + HOSTILE_INTS))
        note(parts, f"node {node.get('name')}: extra arg {args[-1]!r}")
        return parts
    if action == "drop":
        args.pop(rng.randrange(len(args)))
        note(parts, f"node {node.get('name')}: drop an arg")
        return parts
    paths = [()] + _paths(args)
    paths = [p for p in paths if p]
    path = rng.choice(paths)
    if action == "tagged":
        value = rng.choice(TAGGED_ARGS)
    elif action == "sym":
        value = {"$sym": rng.choice(DIM_EXPRESSIONS)}
    else:
        value = _hostile_like(rng, _get(args, path))
    _set(args, path, value)
    note(parts, f"node {node.get('name')} ({attrs.get('target')}): args{list(path)} = {value!r}"[:300])
    return parts


@mutator(weight=3.0)
def node_to_aten(rng, parts):
    """Turn a node into an aten call of a dangerous or allow-listed target with hostile arguments."""
    node = rng.choice(_nodes(parts))
    target = rng.choice(sorted(ATEN_TEMPLATES)) if rng.random() < 0.8 else _pick_target(rng)
    args = rng.choice(ATEN_TEMPLATES.get(target) or [[X], [X, Y], []])
    node["op"] = "aten"
    node["attrs"] = {"target": target, "args": copy.deepcopy(args), "kwargs": {}}
    ins = node.get("inputs") if isinstance(node.get("inputs"), list) else []
    names = _value_names(parts)
    while len(ins) < 2 and names:
        ins.append(rng.choice(names))
    node["inputs"] = ins
    note(parts, f"node {node.get('name')}: now {target}{args!r}"[:300])
    return parts


# ---- post-ops ---------------------------------------------------------------------------------------------------------


@mutator(weight=2.0)
def post_ops(rng, parts):
    """Post-ops: unknown kinds, binary ops with out-of-range/negative/weight operand indices, 1000 of them."""
    nodes = [n for n in _nodes(parts) if isinstance(n.get("attrs"), dict) and "post_ops" in n["attrs"]]
    if not nodes:
        raise Skip("no post-ops")
    node = rng.choice(nodes)
    ops = node["attrs"]["post_ops"]
    if not isinstance(ops, list):
        ops = node["attrs"]["post_ops"] = []
    inputs = node.get("inputs")
    n_in = len(inputs) if isinstance(inputs, list) else 0  # (an earlier mutation may have made it anything)
    entries = [op for op in ops if isinstance(op, dict)]
    action = rng.choice(["add_binary", "add_unary", "kind", "operand", "many", "clear"])
    if action == "add_binary":
        ops.append({"kind": rng.choice(["add", "mul", "relu", "sub"]),
                    "operand": rng.choice([0, 1, 2, n_in - 1, n_in, -1, 2**63, None, "1", 1.0])})
    elif action == "add_unary":
        ops.append({"kind": rng.choice(["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "add", "nope", ""]),
                    "operand": None})
    elif action == "kind" and entries:
        rng.choice(entries)["kind"] = rng.choice(["add", "mul", "relu", "nope", "", None, 1, "__import__"])
    elif action == "operand" and entries:
        rng.choice(entries)["operand"] = rng.choice([0, 1, 2, 3, n_in, -1, 2**31, None, True])
    elif action == "many":
        ops.extend([{"kind": "relu", "operand": None}] * rng.choice([10, 1000]))
    else:
        ops.clear()
    note(parts, f"node {node.get('name')}: post_ops {action} -> {str(ops[:3])[:200]}")
    return parts


# ---- value specs and graph IO ---------------------------------------------------------------------------------------


def _spec_sites(parts: Parts) -> list[dict]:
    specs = [s for s in _values(parts).values() if isinstance(s, dict)]
    if isinstance(parts.manifest, dict):
        for key in ("inputs", "outputs"):
            for io in parts.manifest.get(key) or []:
                if isinstance(io, dict) and isinstance(io.get("spec"), dict):
                    specs.append(io["spec"])
    return specs


@mutator(weight=2.5)
def value_spec(rng, parts):
    """A value's dtype, shape or memory format (the kernels are picked and built from these specs)."""
    values = _values(parts)
    name = rng.choice(sorted(values))
    spec = values[name]
    if not isinstance(spec, dict):
        raise Skip("spec not a dict")
    what = rng.choice(["dtype", "shape", "shape", "memory_format", "rank"])
    if what == "dtype":
        spec["dtype"] = rng.choice(DTYPE_NAMES)
    elif what == "memory_format":
        spec["memory_format"] = rng.choice(MEMORY_FORMATS)
    elif what == "rank":
        shape = spec.get("shape") if isinstance(spec.get("shape"), list) else []
        spec["shape"] = shape[:-1] if shape and rng.random() < 0.5 else shape + [rng.choice([1, 2, "batch"])]
    else:
        shape = spec.get("shape")
        if isinstance(shape, list) and shape:
            i = rng.randrange(len(shape))
            shape[i] = rng.choice(HOSTILE_INTS[:12] + DIM_EXPRESSIONS[-20:] + [shape[i] + 1 if isinstance(shape[i], int) else 1])
        else:
            spec["shape"] = rng.choice([[], [0], [2**62], ["batch"]])
    # keep the manifest's copy of an input/output spec in step most of the time (it is cross-checked)
    if isinstance(parts.manifest, dict) and rng.random() < 0.7:
        for key in ("inputs", "outputs"):
            for io in parts.manifest.get(key) or []:
                if isinstance(io, dict) and io.get("name") == name:
                    io["spec"] = copy.deepcopy(spec)
    note(parts, f"value {name}: {what} -> {spec.get(what if what != 'rank' else 'shape')!r}"[:300])
    return parts


@mutator(weight=1.5)
def graph_io(rng, parts):
    """Graph inputs/outputs/constants lists: drop, duplicate, add an existing or unknown name, reorder."""
    g = parts.graph
    if not isinstance(g, dict):
        raise Skip("graph not an object")
    key = rng.choice(["inputs", "outputs", "constants"])
    items = g.get(key)
    if not isinstance(items, list):
        raise Skip("no list")
    action = rng.choice(["drop", "dup", "add", "unknown", "reorder"])
    if action == "drop" and items:
        items.pop(rng.randrange(len(items)))
    elif action == "dup" and items:
        items.append(rng.choice(items))
    elif action == "add":
        items.append(rng.choice(_value_names(parts)))
    elif action == "unknown":
        items.append(rng.choice(["IPXFUZZ_nowhere", "", None, 0]))
    elif len(items) > 1:
        items.reverse()
    note(parts, f"graph {key}: {action}")
    return parts


# ---- fixups (appended by the driver so a mutation survives the manifest/graph/tensor cross-checks) -----------------


@mutator(weight=0.0)
def fixup_sync_manifest(rng, parts):
    """The manifest's inputs, outputs and dims re-derived from the graph (what the writer would record)."""
    g, m = parts.graph, parts.manifest
    if not isinstance(g, dict) or not isinstance(m, dict):
        raise Skip("not objects")
    values = g.get("values") if isinstance(g.get("values"), dict) else {}
    for key in ("inputs", "outputs"):
        if isinstance(g.get(key), list):
            m[key] = [{"name": n, "spec": copy.deepcopy(values.get(n))} for n in g[key] if isinstance(n, str)]
    if "dims" in g:
        m["dims"] = copy.deepcopy(g["dims"])
    note(parts, "fixup: manifest signature := graph's")
    return parts


@mutator(weight=0.0)
def fixup_sync_constants(rng, parts):
    """Each constant's graph spec re-derived from its tensor header (dtype, shape)."""
    values = _values(parts)
    changed = 0
    for name, rec in parts.tensors.items():
        spec = values.get(name)
        if isinstance(spec, dict) and isinstance(rec.dtype, str) and rec.dtype in IR_NAME_OF_CODE:
            if spec.get("dtype") != IR_NAME_OF_CODE[rec.dtype] or spec.get("shape") != rec.shape:
                spec["dtype"], spec["shape"] = IR_NAME_OF_CODE[rec.dtype], rec.shape
                changed += 1
    note(parts, f"fixup: {changed} constant spec(s) := tensor headers")
    return parts


# ---- tensors ----------------------------------------------------------------------------------------------------------


def _tensor_name(rng: random.Random, parts: Parts, prefer: Callable[[str, TensorRec], bool] | None = None) -> str:
    names = list(parts.tensors)
    if not names:
        raise Skip("no tensors")
    if prefer is not None:
        preferred = [n for n in names if prefer(n, parts.tensors[n])]
        if preferred and rng.random() < 0.7:
            return rng.choice(preferred)
    return rng.choice(names)


def _is_int(name: str, rec: TensorRec) -> bool:
    return rec.dtype in ("I64", "I32", "I16", "I8", "U8", "BOOL")


@mutator(weight=2.5)
def tensor_extreme_values(rng, parts):
    """Fill (part of) a tensor with edge values of its dtype: indices out of range, NaN scales, ..."""
    name = _tensor_name(rng, parts, prefer=lambda n, r: _is_int(n, r) or "scale" in n or "zero" in n)
    rec = parts.tensors[name]
    t = rec.as_torch()
    if t is None or t.numel() == 0:
        raise Skip("header does not describe the bytes")
    t = t.clone()
    if t.dtype == torch.bool:
        value: Any = rng.choice([True, False])
    elif t.dtype.is_floating_point:
        info = torch.finfo(t.dtype)
        value = rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.0, info.max, info.min, info.tiny, -1.0, 1e-30])
    else:
        info = torch.iinfo(t.dtype)
        value = rng.choice([v for v in (info.max, info.min, -1, 0, 1, 1000, 10**6, info.max // 2)
                            if info.min <= v <= info.max])
    flat = t.reshape(-1)
    if rng.random() < 0.5:
        flat.fill_(value)
        where = "all"
    else:
        idx = rng.randrange(flat.numel())
        flat[idx] = value
        where = f"element {idx}"
    parts.tensors[name] = TensorRec(rec.dtype, rec.shape, TensorRec.of(t).data, rec.extra)
    note(parts, f"tensor {name}: {where} = {value!r}")
    return parts


@mutator(weight=1.5)
def tensor_flip_bytes(rng, parts):
    """Flip bits in a tensor's bytes."""
    name = _tensor_name(rng, parts)
    rec = parts.tensors[name]
    if not rec.data:
        raise Skip("empty tensor")
    data = bytearray(rec.data)
    for _ in range(rng.choice([1, 1, 4, 64])):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    rec.data = bytes(data)
    note(parts, f"tensor {name}: flip bits")
    return parts


@mutator(weight=1.5)
def tensor_header_dtype(rng, parts):
    """A tensor's header dtype changed, bytes kept (same-size dtypes make a header that still fits)."""
    name = _tensor_name(rng, parts)
    rec = parts.tensors[name]
    old = rec.dtype
    same_size = [c for c, d in TORCH_OF_CODE.items() if isinstance(old, str) and old in TORCH_OF_CODE
                 and d.itemsize == TORCH_OF_CODE[old].itemsize and c != old]
    rec.dtype = rng.choice(same_size) if same_size and rng.random() < 0.6 else rng.choice(DTYPE_CODES)
    note(parts, f"tensor {name}: header dtype {old} -> {rec.dtype!r} (bytes kept)")
    return parts


@mutator(weight=1.5)
def tensor_header_shape(rng, parts):
    """A tensor's header shape changed, bytes kept (permuted, flattened, wrong rank, huge, not ints)."""
    name = _tensor_name(rng, parts)
    rec = parts.tensors[name]
    old = rec.shape
    shape = list(old) if isinstance(old, list) else []
    choice = rng.randrange(6)
    if choice == 0 and len(shape) > 1:
        rng.shuffle(shape)
    elif choice == 1:
        shape = [int(math.prod(shape))] if all(isinstance(d, int) for d in shape) else [1]
    elif choice == 2:
        shape = shape + [1]
    elif choice == 3 and shape:
        shape[rng.randrange(len(shape))] = rng.choice([0, -1, 2**62, 2**64, 1.5, "1", None])
    elif choice == 4:
        shape = rng.choice([None, "x", {}, [[1]], [2**32, 2**32], [0]])
    else:
        shape = shape[:-1]
    rec.shape = shape
    note(parts, f"tensor {name}: header shape {old} -> {shape!r} (bytes kept)")
    return parts


@mutator(weight=2.5)
def tensor_reshape(rng, parts):
    """A tensor (and its graph spec) changed to another shape with bytes to match: a consistent file whose
    weights do not fit their node (a linear weight [out, in-1], a conv kernel 1x1 instead of 3x3, ...)."""
    name = _tensor_name(rng, parts, prefer=lambda n, r: not n.startswith(EXAMPLE_PREFIX))
    rec = parts.tensors[name]
    t = rec.as_torch()
    if t is None:
        raise Skip("header does not describe the bytes")
    shape = list(t.shape)
    choice = rng.randrange(6)
    if choice == 0 and shape:
        i = rng.randrange(len(shape))
        shape[i] = max(0, shape[i] + rng.choice([-1, 1, -shape[i], shape[i]]))
    elif choice == 1 and len(shape) > 1:
        shape = shape[1:]
    elif choice == 2:
        shape = shape + [rng.choice([1, 2])]
    elif choice == 3:
        shape = [t.numel()]
    elif choice == 4 and shape:
        shape = [1] * len(shape)
    else:
        shape = [0] * max(1, len(shape))
    numel = int(math.prod(shape))
    flat = t.reshape(-1)
    if numel <= flat.numel():
        new = flat[:numel].clone()
    else:
        new = torch.cat([flat, torch.zeros(numel - flat.numel(), dtype=t.dtype)])
    parts.tensors[name] = TensorRec.of(new.reshape(shape))
    values = parts.graph.get("values") if isinstance(parts.graph, dict) else None
    if isinstance(values, dict) and isinstance(values.get(name), dict):
        values[name]["shape"] = shape
    note(parts, f"tensor {name}: reshaped {list(t.shape)} -> {shape} (bytes and graph spec to match)")
    return parts


@mutator(weight=2.0)
def tensor_cast(rng, parts):
    """A tensor (and its graph spec) converted to another dtype: a consistent file with the wrong weight dtype."""
    name = _tensor_name(rng, parts, prefer=lambda n, r: not n.startswith(EXAMPLE_PREFIX))
    rec = parts.tensors[name]
    t = rec.as_torch()
    if t is None:
        raise Skip("header does not describe the bytes")
    code = rng.choice([c for c in TORCH_OF_CODE if c != rec.dtype])
    new = t.to(TORCH_OF_CODE[code])
    parts.tensors[name] = TensorRec.of(new)
    values = parts.graph.get("values") if isinstance(parts.graph, dict) else None
    if isinstance(values, dict) and isinstance(values.get(name), dict):
        values[name]["dtype"] = IR_NAME_OF_CODE[code]
    note(parts, f"tensor {name}: cast {rec.dtype} -> {code} (graph spec to match)")
    return parts


@mutator()
def tensor_truncate_bytes(rng, parts):
    """A tensor's bytes shortened or lengthened, header kept."""
    name = _tensor_name(rng, parts)
    rec = parts.tensors[name]
    cut = rng.choice([0, 1, len(rec.data) // 2, max(0, len(rec.data) - 1)])
    rec.data = rec.data[:cut] if rng.random() < 0.7 else rec.data + b"\0" * rng.choice([1, 4, 4096])
    note(parts, f"tensor {name}: bytes resized to {len(rec.data)} (header kept)")
    return parts


@mutator()
def tensor_swap(rng, parts):
    """Two tensors swap names."""
    if len(parts.tensors) < 2:
        raise Skip("one tensor")
    a, b = rng.sample(list(parts.tensors), 2)
    parts.tensors[a], parts.tensors[b] = parts.tensors[b], parts.tensors[a]
    note(parts, f"tensors {a} and {b} swapped")
    return parts


@mutator()
def tensor_drop(rng, parts):
    """Remove a tensor from the file."""
    name = _tensor_name(rng, parts)
    del parts.tensors[name]
    note(parts, f"tensor {name} removed")
    return parts


@mutator()
def tensor_add_stray(rng, parts):
    """Add a tensor the graph does not use (odd names included)."""
    name = rng.choice(["stray", EXAMPLE_PREFIX + "stray", EXAMPLE_PREFIX + "input_ids", "", "__metadata__x",
                       "../x", "a" * 10000])
    rec = TensorRec.of(torch.zeros(rng.choice([0, 1, 1000]), dtype=rng.choice([torch.float32, torch.int64])))
    parts.tensors[name if name not in parts.tensors else name + "_x"] = rec
    note(parts, f"stray tensor {name[:40]!r} added")
    return parts


@mutator()
def tensor_rename(rng, parts):
    """Rename a tensor so it no longer matches its constant."""
    name = _tensor_name(rng, parts)
    new = rng.choice([name.upper(), name + " ", name + "\x00", "example_inputs/" + name, ""])
    if new in parts.tensors:
        raise Skip("name taken")
    parts.tensors = {(new if k == name else k): v for k, v in parts.tensors.items()}
    note(parts, f"tensor {name} renamed {new!r}")
    return parts


@mutator()
def tensor_header_offsets(rng, parts):
    """data_offsets that overlap, leave gaps, run past the file, or are not ints."""
    name = _tensor_name(rng, parts)
    choice = rng.randrange(7)

    def edit(header: dict, name=name, choice=choice):
        entry = header.get(name)
        if not isinstance(entry, dict):
            return
        a, b = entry["data_offsets"]
        entry["data_offsets"] = [[a + 1, b + 1], [a, b + 1], [0, b - a], [a, 2**64], [-8, b], [b, a], [str(a), b]][choice]
    parts.header_edits.append(edit)
    note(parts, f"tensor {name}: data_offsets variant {choice}")
    return parts


@mutator(weight=0.5)
def tensor_header_extra(rng, parts):
    """An extra key in a tensor's header entry."""
    name = _tensor_name(rng, parts)
    rec = parts.tensors[name]
    rec.extra[rng.choice(["offset", "dtype2", "data", "__metadata__"])] = rng.choice(OTHER_TYPES)
    note(parts, f"tensor {name}: extra header key")
    return parts


@mutator(weight=1.5)
def example_input_edit(rng, parts):
    """The stored example inputs (what run/bench/check call the model with by default)."""
    names = [n for n in parts.tensors if n.startswith(EXAMPLE_PREFIX)]
    if not names:
        raise Skip("no example inputs")
    name = rng.choice(names)
    t = parts.tensors[name].as_torch()
    if t is None:
        raise Skip("header does not describe the bytes")
    choice = rng.randrange(5)
    if choice == 0:
        new = t.to(rng.choice([torch.float32, torch.int32, torch.bool, torch.bfloat16, torch.float64]))
    elif choice == 1:
        new = t.reshape(-1)
    elif choice == 2:
        new = torch.cat([t, t], dim=0) if t.dim() else t
    elif choice == 3 and not t.dtype.is_floating_point and t.dtype != torch.bool:
        info = torch.iinfo(t.dtype)  # (10**6 where the dtype holds it: an int8 KV cache's example rows do not)
        new = t.clone().fill_(rng.choice([v for v in (-1, 10**6, info.max) if info.min <= v <= info.max]))
    else:
        new = t.clone().fill_(math.nan) if t.dtype.is_floating_point else t[..., :0]
    parts.tensors[name] = TensorRec.of(new.contiguous())
    note(parts, f"example input {name}: variant {choice} -> {new.dtype}{list(new.shape)}")
    return parts


# ---- the container ------------------------------------------------------------------------------------------------


@mutator(weight=0.7)
def file_truncate(rng, parts):
    """Truncate the file (to a fraction, or to 0-16 bytes)."""
    frac, small = rng.random(), rng.choice([None, 0, 1, 7, 8, 9, 16])

    def edit(data: bytes, frac=frac, small=small) -> bytes:
        return data[:small] if small is not None else data[:int(len(data) * frac)]
    parts.byte_edits.append(edit)
    note(parts, f"file truncated to {small if small is not None else f'{frac:.3f} of it'}")
    return parts


@mutator(weight=0.7)
def file_flip_bytes(rng, parts):
    """Flip bits in the file's header (JSON) or anywhere."""
    in_header, picks = rng.random() < 0.7, [(rng.random(), rng.randrange(8)) for _ in range(rng.choice([1, 3, 16]))]

    def edit(data: bytes, in_header=in_header, picks=picks) -> bytes:
        out = bytearray(data)
        n = int.from_bytes(data[:8], "little") + 8 if in_header else len(data)
        for frac, bit in picks:
            out[min(len(out) - 1, int(frac * n))] ^= 1 << bit
        return bytes(out)
    parts.byte_edits.append(edit)
    note(parts, f"flip {len(picks)} bit(s) in the {'header' if in_header else 'file'}")
    return parts


@mutator(weight=0.7)
def file_header_length(rng, parts):
    """The 8-byte header length field: 0, off by one, the file size, 2**63, 2**64-1."""
    choice = rng.randrange(8)

    def edit(data: bytes, choice=choice) -> bytes:
        n = int.from_bytes(data[:8], "little")
        value = [0, 1, n - 1, n + 1, len(data) - 8, len(data), 2**63, 2**64 - 1][choice]
        return (value % 2**64).to_bytes(8, "little") + data[8:]
    parts.byte_edits.append(edit)
    note(parts, f"header length field variant {choice}")
    return parts


@mutator(weight=0.5)
def file_append(rng, parts):
    """Append bytes after the last tensor."""
    extra = rng.choice([b"\0", b"x" * 4096, b"\xff" * 7])
    parts.byte_edits.append(lambda data, extra=extra: data + extra)
    note(parts, f"{len(extra)} bytes appended")
    return parts


@mutator(weight=0.7)
def metadata_edit(rng, parts):
    """The safetensors __metadata__ map: non-string values, a key missing, extra keys, not a map at all."""
    from parts import GRAPH_KEY, MANIFEST_KEY
    choice = rng.randrange(6)

    def edit(header: dict, choice=choice):
        meta = header["__metadata__"]
        if choice == 0:
            meta[MANIFEST_KEY] = {"not": "a string"}
        elif choice == 1:
            del meta[GRAPH_KEY]
        elif choice == 2:
            del meta[MANIFEST_KEY]
        elif choice == 3:
            meta["extra"] = 5
        elif choice == 4:
            header["__metadata__"] = [meta[MANIFEST_KEY], meta[GRAPH_KEY]]
        else:
            meta[GRAPH_KEY] = meta[GRAPH_KEY][: len(meta[GRAPH_KEY]) // 2]
    parts.header_edits.append(edit)
    note(parts, f"metadata variant {choice}")
    return parts


FIXUPS = ("fixup_sync_constants", "fixup_sync_manifest")
RANDOM_MUTATORS = [name for name in MUTATORS if name not in FIXUPS]
