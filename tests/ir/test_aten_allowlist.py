"""The aten fallback's allow-list: every listed op runs a tiny valid call that matches torch, every check
refuses the arguments it guards against before the op runs, and the frontend and the loader refuse
ops that are not listed with the same reason."""
from __future__ import annotations

import json
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ipexconvert.errors import ArtifactError, UnsupportedOpError, UserInputError
from ipexconvert.frontend.torch.export import program_from_module
from ipexconvert.ir.ops.aten import AtenOp, refusal_reason
from ipexconvert.ir.ops.aten_allowlist import ALLOWED, MAX_TENSOR_BYTES, MAX_TENSOR_BYTES_ENV, max_tensor_bytes

_GEN = torch.Generator().manual_seed(7)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_GEN)


def I(i: int) -> dict:  # noqa: E743 - reads like the JSON it stands for
    return {"$in": i}


def call(target: str, inputs: list, args: list, kwargs: dict | None = None, dims: dict | None = None):
    attrs = AtenOp.parse_attrs({"target": target, "args": args, "kwargs": kwargs or {}})
    return AtenOp.compile(attrs)(inputs, dims or {})


X = randn(2, 3, 4)
IMG = randn(1, 2, 7, 7)
POS = randn(2, 3).abs() + 0.1

# target -> (inputs, args, kwargs, eager(*inputs)). One tiny valid call per allowed op.
SAMPLES: dict[str, tuple[list, list, dict, Callable]] = {
    "aten.arange.start_step": ([], [1, 10, 3], {}, lambda: torch.arange(1, 10, 3)),
    "aten.full.default": ([], [[2, {"$sym": "batch"}], 1.5], {"dtype": {"$dtype": "bfloat16"}},
                          lambda: torch.full((2, 3), 1.5, dtype=torch.bfloat16)),
    "aten.scalar_tensor.default": ([], [2.5], {}, lambda: torch.tensor(2.5)),
    "aten.clone.default": ([IMG], [I(0)], {"memory_format": {"$memory_format": "channels_last"}},
                           lambda x: x.clone(memory_format=torch.channels_last)),
    "aten.expand.default": ([randn(3, 1)], [I(0), [2, -1, 4]], {}, lambda x: x.expand(2, 3, 4)),
    "aten.select.int": ([X], [I(0), 1, -1], {}, lambda x: x.select(1, -1)),
    "aten.slice.Tensor": ([X], [I(0), 2, 1, 2**63 - 1, 2], {}, lambda x: x[:, :, 1::2]),
    "aten.unsqueeze.default": ([X], [I(0), -1], {}, lambda x: x.unsqueeze(-1)),
    "aten.split_with_sizes.default": ([X], [I(0), [1, 3], -1], {}, lambda x: x.split([1, 3], -1)),
    "aten.flip.default": ([X], [I(0), [0, -1]], {}, lambda x: x.flip(0, -1)),
    "aten.cat.default": ([X, randn(2, 1, 4)], [[I(0), I(1)], 1], {}, lambda a, b: torch.cat([a, b], 1)),
    "aten.gather.default": ([X, torch.tensor([[[3, 0], [1, 1], [2, 2]]] * 2)], [I(0), 2, I(1)], {},
                            lambda x, i: torch.gather(x, 2, i)),
    "aten.index.Tensor": ([X, torch.tensor([[0], [1]]), torch.tensor([[-1, 0, 2]])], [I(0), [I(1), None, I(2)]], {},
                          lambda x, i, j: x[i, :, j]),
    "aten.cumsum.default": ([X], [I(0), 1], {"dtype": {"$dtype": "float64"}}, lambda x: x.cumsum(1, dtype=torch.float64)),
    "aten.linalg_vector_norm.default": ([X], [I(0), 2, [-1], True], {}, lambda x: torch.linalg.vector_norm(x, 2, -1, True)),
    "aten.mean.default": ([X], [I(0)], {}, lambda x: x.mean()),
    "aten.mean.dim": ([X], [I(0), [0, 2]], {}, lambda x: x.mean((0, 2))),
    "aten.sum.dim_IntList": ([X], [I(0), [1], True], {}, lambda x: x.sum(1, keepdim=True)),
    "aten.max_pool2d_with_indices.default": ([IMG], [I(0), [3, 3], [2, 2], [1, 1], [1, 1], True], {},
                                             lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)),
    "aten.abs.default": ([X], [I(0)], {}, torch.abs),
    "aten.clamp.default": ([X], [I(0), -0.5, {"$float": "inf"}], {}, lambda x: x.clamp(min=-0.5)),
    "aten.cos.default": ([X], [I(0)], {}, torch.cos),
    "aten.exp.default": ([X], [I(0)], {}, torch.exp),
    "aten.ge.Scalar": ([X], [I(0), 0], {}, lambda x: x >= 0),
    "aten.ne.Scalar": ([X], [I(0), 0], {}, lambda x: x != 0),
    "aten.neg.default": ([X], [I(0)], {}, torch.neg),
    "aten.pow.Tensor_Scalar": ([X], [I(0), 2], {}, lambda x: x.pow(2)),
    "aten.rsqrt.default": ([POS], [I(0)], {}, torch.rsqrt),
    "aten.sin.default": ([X], [I(0)], {}, torch.sin),
    "aten.add.Tensor": ([X, randn(4)], [I(0), I(1)], {"alpha": 2}, lambda a, b: torch.add(a, b, alpha=2)),
    "aten.bitwise_and.Tensor": ([X > 0, X < 1], [I(0), I(1)], {}, torch.bitwise_and),
    "aten.eq.Tensor": ([X, X[:1]], [I(0), I(1)], {}, torch.eq),
    "aten.le.Tensor": ([X, randn(3, 1)], [I(0), I(1)], {}, torch.le),
    "aten.where.self": ([X > 0, X, randn(1)], [I(0), I(1), I(2)], {}, torch.where),
    "aten.alias.default": ([X], [I(0)], {}, lambda x: x),
    "aten.squeeze.dim": ([randn(2, 1, 3)], [I(0), 1], {}, lambda x: x.squeeze(1)),
    "aten.squeeze.dims": ([randn(2, 1, 3, 1)], [I(0), [1, -1]], {}, lambda x: x.squeeze((1, -1))),
    "aten.permute.default": ([X], [I(0), [2, 0, 1]], {}, lambda x: x.permute(2, 0, 1)),
    "aten.view.default": ([X], [I(0), [-1, 4]], {}, lambda x: x.view(-1, 4)),
    "aten._to_copy.default": ([X], [I(0)], {"dtype": {"$dtype": "bfloat16"}}, lambda x: x.to(torch.bfloat16)),
    "aten.convolution.default": ([randn(2, 3, 5), randn(3, 4, 3), randn(4)],
                                 [I(0), I(1), I(2), [2], [1], [1], True, [1], 1], {},
                                 lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1)),
    "aten.sub.Tensor": ([X, randn(3, 4)], [I(0), I(1)], {"alpha": 3}, lambda a, b: torch.sub(a, b, alpha=3)),
    "aten.mul.Tensor": ([X, randn(2, 1, 4)], [I(0), I(1)], {}, torch.mul),
    "aten.div.Tensor": ([X, POS[:, :, None]], [I(0), I(1)], {}, torch.div),
    "aten.constant_pad_nd.default": ([X], [I(0), [1, 2, 0, -1], 0.5], {}, lambda x: F.pad(x, (1, 2, 0, -1), value=0.5)),
    "aten.repeat.default": ([randn(2, 3)], [I(0), [2, 1, 3]], {}, lambda x: x.repeat(2, 1, 3)),
    "aten.index_select.default": ([X, torch.tensor([2, 0, 2])], [I(0), 1, I(1)], {}, lambda x, i: x.index_select(1, i)),
    "aten.amax.default": ([X], [I(0), [-1]], {}, lambda x: x.amax(-1)),
    "aten._adaptive_avg_pool2d.default": ([IMG], [I(0), [3, 2]], {}, lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
    "aten.avg_pool2d.default": ([IMG], [I(0), [3, 3], [2, 2], [1, 1], False, False], {},
                                lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    "aten.bitwise_not.default": ([X > 0], [I(0)], {}, torch.bitwise_not),
    "aten.eq.Scalar": ([X.round()], [I(0), 0], {}, lambda x: x == 0),
    "aten.gt.Scalar": ([X], [I(0), 0.5], {}, lambda x: x > 0.5),
    "aten.le.Scalar": ([X], [I(0), 0.5], {}, lambda x: x <= 0.5),
    "aten.log.default": ([POS], [I(0)], {}, torch.log),
    "aten.logical_not.default": ([X > 0], [I(0)], {}, torch.logical_not),
    "aten.lt.Scalar": ([X], [I(0), 0], {}, lambda x: x < 0),
    "aten.reciprocal.default": ([POS], [I(0)], {}, torch.reciprocal),
    "aten.sqrt.default": ([POS], [I(0)], {}, torch.sqrt),
    "aten.bitwise_or.Tensor": ([X > 0, X < -1], [I(0), I(1)], {}, torch.bitwise_or),
    "aten.ge.Tensor": ([X, randn(4)], [I(0), I(1)], {}, torch.ge),
    "aten.gt.Tensor": ([X, randn(4)], [I(0), I(1)], {}, torch.gt),
    "aten.logical_and.default": ([X > 0, X < 1], [I(0), I(1)], {}, torch.logical_and),
    "aten.lt.Tensor": ([X, randn(4)], [I(0), I(1)], {}, torch.lt),
    "aten.maximum.default": ([X, randn(3, 1)], [I(0), I(1)], {}, torch.maximum),
    "aten.minimum.default": ([X, randn(3, 1)], [I(0), I(1)], {}, torch.minimum),
    "aten.ne.Tensor": ([X, X.flip(0)], [I(0), I(1)], {}, torch.ne),
    "aten.acos.default": ([X.clamp(-0.9, 0.9)], [I(0)], {}, torch.acos),
    "aten.acosh.default": ([POS + 1], [I(0)], {}, torch.acosh),
    "aten.asin.default": ([X.clamp(-0.9, 0.9)], [I(0)], {}, torch.asin),
    "aten.asinh.default": ([X], [I(0)], {}, torch.asinh),
    "aten.atan.default": ([X], [I(0)], {}, torch.atan),
    "aten.atanh.default": ([X.clamp(-0.9, 0.9)], [I(0)], {}, torch.atanh),
    "aten.ceil.default": ([X], [I(0)], {}, torch.ceil),
    "aten.cosh.default": ([X], [I(0)], {}, torch.cosh),
    "aten.elu.default": ([X], [I(0), 0.5], {}, lambda x: F.elu(x, 0.5)),
    "aten.erf.default": ([X], [I(0)], {}, torch.erf),
    "aten.expm1.default": ([X], [I(0)], {}, torch.expm1),
    "aten.floor.default": ([X], [I(0)], {}, torch.floor),
    "aten.isinf.default": ([X / X.round()], [I(0)], {}, torch.isinf),
    "aten.isnan.default": ([X.log()], [I(0)], {}, torch.isnan),
    "aten.leaky_relu.default": ([X], [I(0), 0.2], {}, lambda x: F.leaky_relu(x, 0.2)),
    "aten.log1p.default": ([POS], [I(0)], {}, torch.log1p),
    "aten.round.default": ([X * 3], [I(0)], {}, torch.round),
    "aten.sign.default": ([X], [I(0)], {}, torch.sign),
    "aten.sinh.default": ([X], [I(0)], {}, torch.sinh),
    "aten.tan.default": ([X], [I(0)], {}, torch.tan),
    "aten.full_like.default": ([X], [I(0), 2.5], {}, lambda x: torch.full_like(x, 2.5)),
    "aten.div.Tensor_mode": ([X * 5, POS[:, :, None]], [I(0), I(1)], {"rounding_mode": "trunc"},
                             lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    "aten.fmod.Tensor": ([X * 5, POS[:, :, None]], [I(0), I(1)], {}, torch.fmod),
    "aten.remainder.Tensor": ([X * 5, POS[:, :, None]], [I(0), I(1)], {}, torch.remainder),
    "aten.pow.Tensor_Tensor": ([POS, randn(3)], [I(0), I(1)], {}, torch.pow),
    "aten.logical_or.default": ([X > 0, X < -1], [I(0), I(1)], {}, torch.logical_or),
    "aten.logical_xor.default": ([X > 0, X < 1], [I(0), I(1)], {}, torch.logical_xor),
    "aten.bitwise_xor.Tensor": ([X > 0, X < 1], [I(0), I(1)], {}, torch.bitwise_xor),
    "aten.amin.default": ([X], [I(0), [0, -1]], {}, lambda x: x.amin((0, -1))),
    "aten.argmax.default": ([X], [I(0), 1, True], {}, lambda x: x.argmax(1, keepdim=True)),
    "aten.argmin.default": ([X], [I(0), -1], {}, lambda x: x.argmin(-1)),
    "aten.logsumexp.default": ([X], [I(0), [1]], {}, lambda x: x.logsumexp(1)),
    "aten.prod.dim_int": ([X], [I(0), 2], {}, lambda x: x.prod(2)),
    "aten._log_softmax.default": ([X], [I(0), -1, False], {}, lambda x: torch.log_softmax(x, -1)),
}


def test_every_allowed_op_has_a_sample_call():
    assert set(SAMPLES) == set(ALLOWED)


@pytest.mark.parametrize("target", sorted(ALLOWED))
def test_allowed_op_runs_and_matches_torch(target: str):
    inputs, args, kwargs, eager = SAMPLES[target]
    got = call(target, inputs, args, kwargs, dims={"batch": 3})
    want = eager(*inputs)
    for g, w in zip(*(list(v) if isinstance(v, (tuple, list)) else [v] for v in (got, want))):
        assert g.dtype == w.dtype and g.shape == w.shape, target
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("target", sorted(ALLOWED))
def test_allowed_op_is_pure(target: str):
    """The list never holds an op that mutates its inputs or draws random numbers."""
    op = getattr(getattr(torch.ops.aten, target.split(".")[1]), target.split(".")[2])
    assert not op._schema.is_mutable and torch.Tag.nondeterministic_seeded not in op.tags
    assert refusal_reason(target) is None


# ---- what is refused by name: the ops of the review finding, and core ops nobody listed --------------------------

UNSAFE = [
    "aten.max_pool2d_with_indices_backward.default", "aten.convolution_backward.default",
    "aten._native_batch_norm_legit_no_training.default", "aten._native_batch_norm_legit.no_stats",
    "aten.col2im.default", "aten._embedding_bag.default", "aten._cdist_forward.default", "aten._fft_r2c.default",
    "aten.empty.memory_format", "aten.empty_strided.default", "aten.as_strided.default",
    "aten._local_scalar_dense.default", "aten.sort.default", "aten.roll.default",
]


@pytest.mark.parametrize("target", UNSAFE)
def test_unlisted_ops_are_refused_by_refusal_reason_and_compile(target: str):
    why = refusal_reason(target)
    assert why is not None and ("not on the list" in why or "not a core ATen op" in why), why
    with pytest.raises(ValueError, match="refused") as info:
        AtenOp.compile(AtenOp.parse_attrs({"target": target, "args": [I(0)]}))
    assert target in str(info.value)


@pytest.mark.parametrize("target", ["aten.__class__.__name__", "aten.sum.__call__", "aten.sum", "torch.ops.aten.sum.default"])
def test_names_that_are_not_overloads_are_refused(target: str):
    assert "not" in refusal_reason(target)


def test_model_using_an_unlisted_op_fails_conversion_naming_it():
    class Sorts(nn.Module):
        def forward(self, x):
            return torch.sort(x, 1).values + 1

    with pytest.raises(UnsupportedOpError) as info:
        program_from_module(Sorts(), {"x": torch.randn(2, 3)}, {})
    assert "aten.sort.default" in info.value.problem and "aten_allowlist" in info.value.problem
    assert info.value.fix


# ---- argument checks ---------------------------------------------------------------------------------------------

BIG = 2**40  # far over any budget

# (id, target, inputs, args, kwargs, error class, message fragment)
REFUSED_CALLS = [
    ("full-over-budget", "aten.full.default", [], [[BIG, 4], 0.0], {}, ArtifactError, "limit"),
    ("full-negative", "aten.full.default", [], [[-1, 4], 0.0], {}, ArtifactError, "negative"),
    ("full-sym-over-budget", "aten.full.default", [], [[{"$sym": "batch*1000000000"}, 100], 0.0], {}, ArtifactError, "limit"),
    ("arange-over-budget", "aten.arange.start_step", [], [0, BIG], {}, ArtifactError, "limit"),
    ("arange-zero-step", "aten.arange.start_step", [], [0, 10, 0], {}, ArtifactError, "step"),
    ("arange-inf", "aten.arange.start_step", [], [0, {"$float": "inf"}], {}, ArtifactError, "finite"),
    ("expand-2**62", "aten.expand.default", [randn(1)], [I(0), [2**62]], {}, ArtifactError, "limit"),
    ("expand-negative", "aten.expand.default", [randn(1)], [I(0), [-2]], {}, ArtifactError, "expand"),
    ("expand-new-dim-minus-one", "aten.expand.default", [randn(3)], [I(0), [-1, 3]], {}, ArtifactError, "expand"),
    ("repeat-over-budget", "aten.repeat.default", [randn(2)], [I(0), [BIG, 1]], {}, ArtifactError, "limit"),
    ("repeat-negative", "aten.repeat.default", [randn(2)], [I(0), [-1]], {}, ArtifactError, "repeats"),
    ("pad-over-budget", "aten.constant_pad_nd.default", [randn(2)], [I(0), [0, BIG]], {}, ArtifactError, "limit"),
    ("pad-crops-below-zero", "aten.constant_pad_nd.default", [randn(2)], [I(0), [0, -3]], {}, ArtifactError, "negative"),
    ("broadcast-over-budget", "aten.add.Tensor", [randn(1, 1).expand(2**20, 1), randn(1, 1).expand(1, 2**20)],
     [I(0), I(1)], {}, ArtifactError, "limit"),
    ("cat-ranks-differ", "aten.cat.default", [randn(3), randn(1, 3)], [[I(0), I(1)]], {}, ArtifactError, "ranks"),
    ("cat-sizes-differ", "aten.cat.default", [randn(2, 3), randn(2, 4)], [[I(0), I(1)], 0], {}, ArtifactError, "cat"),
    ("cat-dim-out-of-range", "aten.cat.default", [randn(2, 3)], [[I(0)], 5], {}, ArtifactError, "out of range"),
    ("slice-negative-step", "aten.slice.Tensor", [randn(4)], [I(0), 0, 0, 4, -1], {}, ArtifactError, "step"),
    ("slice-zero-step", "aten.slice.Tensor", [randn(4)], [I(0), 0, 0, 4, 0], {}, ArtifactError, "step"),
    ("select-out-of-range", "aten.select.int", [randn(4)], [I(0), 0, 4], {}, ArtifactError, "out of range"),
    ("view-two-minus-ones", "aten.view.default", [randn(4)], [I(0), [-1, -1]], {}, ArtifactError, "-1"),
    ("view-numel-differs", "aten.view.default", [randn(4)], [I(0), [3]], {}, ArtifactError, "cannot view"),
    ("split-sizes-do-not-add-up", "aten.split_with_sizes.default", [randn(4)], [I(0), [2, 3]], {}, ArtifactError, "add up"),
    ("split-negative-size", "aten.split_with_sizes.default", [randn(4)], [I(0), [5, -1]], {}, ArtifactError, "add up"),
    ("flip-dim-twice", "aten.flip.default", [X], [I(0), [0, -3]], {}, ArtifactError, "twice"),
    ("permute-not-a-permutation", "aten.permute.default", [X], [I(0), [0, 0, 1]], {}, ArtifactError, "permutation"),
    ("gather-out-of-range", "aten.gather.default", [randn(3), torch.tensor([3])], [I(0), 0, I(1)], {}, UserInputError, "outside"),
    ("gather-negative", "aten.gather.default", [randn(3), torch.tensor([-1])], [I(0), 0, I(1)], {}, UserInputError, "outside"),
    ("gather-float-index", "aten.gather.default", [randn(3), torch.tensor([0.0])], [I(0), 0, I(1)], {},
     ArtifactError, "int64 or int32"),
    ("index-out-of-range", "aten.index.Tensor", [randn(3, 4), torch.tensor([0, 100000000])], [I(0), [I(1)]], {},
     UserInputError, "outside"),
    ("index-too-negative", "aten.index.Tensor", [randn(3, 4), torch.tensor([-4])], [I(0), [I(1)]], {}, UserInputError, "outside"),
    ("index-too-many", "aten.index.Tensor", [randn(3), torch.tensor([0]), torch.tensor([0])], [I(0), [I(1), I(2)]], {},
     ArtifactError, "indices"),
    ("index-mask-shape", "aten.index.Tensor", [randn(3, 4), torch.ones(3, 5, dtype=torch.bool)], [I(0), [I(1)]], {},
     ArtifactError, "bool index"),
    ("index-broadcast-over-budget", "aten.index.Tensor",
     [randn(2, 2), torch.zeros(1, dtype=torch.long).expand(2**16)[:, None], torch.zeros(1, dtype=torch.long).expand(2**16)],
     [I(0), [I(1), I(2)]], {}, ArtifactError, "limit"),
    ("index-select-out-of-range", "aten.index_select.default", [randn(3), torch.tensor([5])], [I(0), 0, I(1)], {},
     UserInputError, "outside"),
    ("pool-padding-over-half-kernel", "aten.max_pool2d_with_indices.default", [IMG], [I(0), [2, 2], [1, 1], [2, 2]], {},
     ArtifactError, "padding"),
    ("pool-zero-stride", "aten.avg_pool2d.default", [IMG], [I(0), [2, 2], [0, 0]], {}, ArtifactError, "positive"),
    ("pool-zero-divisor", "aten.avg_pool2d.default", [IMG], [I(0), [2, 2], [2, 2], [0, 0], False, True, 0], {},
     ArtifactError, "divisor"),
    ("adaptive-pool-over-budget", "aten._adaptive_avg_pool2d.default", [IMG], [I(0), [BIG, 1]], {}, ArtifactError, "limit"),
    ("adaptive-pool-zero", "aten._adaptive_avg_pool2d.default", [IMG], [I(0), [0, 1]], {}, ArtifactError, "adaptive"),
    ("conv-padding-over-budget", "aten.convolution.default", [randn(1, 1, 4), randn(1, 1, 1), None],
     [I(0), I(1), I(2), [1], [BIG], [1], False, [0], 1], {}, ArtifactError, "limit"),
    ("conv-channels-mismatch", "aten.convolution.default", [randn(1, 2, 4), randn(1, 3, 1), None],
     [I(0), I(1), I(2), [1], [0], [1], False, [0], 1], {}, ArtifactError, "does not match"),
    ("conv-zero-groups", "aten.convolution.default", [randn(1, 2, 4), randn(1, 2, 1), None],
     [I(0), I(1), I(2), [1], [0], [1], False, [0], 0], {}, ArtifactError, "positive"),
    ("to-copy-widening-over-budget", "aten._to_copy.default", [torch.zeros(1, dtype=torch.bool).expand(2**30)], [I(0)],
     {"dtype": {"$dtype": "float64"}}, ArtifactError, "limit"),
    ("reduce-dim-out-of-range", "aten.sum.dim_IntList", [X], [I(0), [3]], {}, ArtifactError, "out of range"),
    ("tensor-where-an-int-goes", "aten.unsqueeze.default", [X, X], [I(0), I(1)], {}, ArtifactError, "not an integer"),
]


@pytest.mark.parametrize("case", REFUSED_CALLS, ids=[c[0] for c in REFUSED_CALLS])
def test_argument_checks_refuse_before_the_op_runs(case):
    """Calls with a tensor or symbolic argument are refused when run; all-constant calls already when compiled
    (ValueError, which the executor reports as an ArtifactError at load)."""
    _, target, inputs, args, kwargs, error, fragment = case
    if '"$in"' in json.dumps([args, kwargs]) or '"$sym"' in json.dumps([args, kwargs]):
        with pytest.raises(error, match=fragment) as info:
            call(target, inputs, args, kwargs, dims={"batch": 8})
        assert target in info.value.problem and info.value.fix
    else:
        assert error is ArtifactError
        with pytest.raises(ValueError, match=fragment) as info:
            call(target, inputs, args, kwargs)
        assert target in str(info.value)


def test_constant_arguments_over_budget_are_refused_at_compile():
    """A `full` whose size is all constants is refused when the node is compiled (at load)."""
    attrs = AtenOp.parse_attrs({"target": "aten.full.default", "args": [[10**10], 1.0]})
    with pytest.raises(ValueError, match="aten.full.default.*limit"):
        AtenOp.compile(attrs)


@pytest.mark.parametrize("args, kwargs, fragment", [
    ([I(0), 1, 2], {}, "positional"),            # cumsum(self, dim) given a third positional
    ([I(0)], {}, "needs argument"),             # dim missing
    ([I(0), 1], {"bogus": 1}, "no argument"),   # a keyword the schema lacks
    ([I(0), 1], {"dim": 1}, "no argument"),     # dim given twice
])
def test_calls_torch_could_not_bind_are_refused_at_compile(args, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        AtenOp.compile(AtenOp.parse_attrs({"target": "aten.cumsum.default", "args": args, "kwargs": kwargs}))


def test_torch_refusing_the_arguments_is_an_artifact_error():
    """What no check covers but torch refuses (here: a gather index longer than the input outside the gathered dim)
    is still a project error, not a RuntimeError escaping to the CLI."""
    with pytest.raises(ArtifactError, match="aten.gather.default failed"):
        call("aten.gather.default", [randn(2, 3), torch.tensor([[0], [1], [2]])], [I(0), 1, I(1)])


def test_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)
    assert max_tensor_bytes() == MAX_TENSOR_BYTES
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "1000")
    assert max_tensor_bytes() == 1000
    with pytest.raises(ArtifactError, match="1000-byte limit"):
        call("aten.full.default", [], [[{"$sym": "batch"}, 100], 0.0], {"dtype": {"$dtype": "float32"}}, {"batch": 3})
    assert call("aten.full.default", [], [[{"$sym": "batch"}, 10], 0.0], {"dtype": {"$dtype": "float32"}},
                {"batch": 3}).shape == (3, 10)
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "lots")
    with pytest.raises(UserInputError, match=MAX_TENSOR_BYTES_ENV):
        max_tensor_bytes()


def test_shape_rule_on_meta_tensors_skips_the_index_values():
    """infer() runs the op on meta tensors: shape checks apply, the min/max of indices is not read."""
    from ipexconvert.ir.spec import TensorSpec

    specs = [TensorSpec(dtype="float32", shape=[3, 4]), TensorSpec(dtype="int64", shape=[2, 4])]
    attrs = AtenOp.parse_attrs({"target": "aten.gather.default", "args": [I(0), 0, I(1)]})
    assert AtenOp.infer(specs, attrs) == [TensorSpec(dtype="float32", shape=[2, 4])]
