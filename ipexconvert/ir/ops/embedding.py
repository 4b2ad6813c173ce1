"""embedding: row lookup in a weight table. inputs: weight [V, D], indices (int).

The indices come from the caller (token ids): each run checks them against the table (one min/max
over the ids, tiny next to the lookup) so an id outside the vocabulary is a clear input error,
not an IndexError from inside torch."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...errors import UserInputError

from ..opdef import Arity, OpDef, register_op
from ..spec import TensorSpec
from ._common import expect_dtype, expect_rank


@register_op
class EmbeddingOp(OpDef):
    name = "embedding"
    arity = Arity(2, 2)

    @classmethod
    def infer(cls, inputs, attrs):
        w, idx = inputs
        expect_rank(w, (2,), "the weight")
        expect_dtype(idx, ("int64", "int32"), "the indices")
        return [TensorSpec(dtype=w.dtype, shape=[*idx.shape, w.shape[1]])]

    @classmethod
    def reference(cls, inputs, attrs, dims):
        weight, indices = inputs
        check_indices(indices, weight.shape[0])
        return F.embedding(indices, weight)


def check_indices(indices: torch.Tensor, rows: int) -> None:
    """Every index in 0..rows-1, else a UserInputError naming the id and the valid range."""
    if indices.numel() == 0:
        return
    lo, hi = torch.aminmax(indices)
    lo, hi = int(lo), int(hi)
    if lo < 0 or hi >= rows:
        raise bad_ids_error(rows, f"{lo if lo < 0 else hi} (the ids given span {lo}..{hi})")


def bad_ids_error(rows: int, which: str) -> UserInputError:
    return UserInputError(f"an id input of the model (token ids such as input_ids or token_type_ids) holds {which}, outside "
                          f"an embedding table of {rows} rows: valid ids are 0..{rows - 1}",
                          f"pass ids from this model's tokenizer/vocabulary, each in 0..{rows - 1}")
