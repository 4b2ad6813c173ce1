"""Teacher-forced accuracy of a decoder artifact against its float reference.

One call on random ids says little about a causal LM: what a user sees is a long run of next-token
predictions, each made with the KV cache that all earlier calls filled. So the artifact is driven as
generate() drives it (examples/decoder_cache.py's signature): a short prompt first (prefill), then one
token a call, but always fed the *true* next token of a fixed text (teacher forcing), so both models
predict at the same positions from the same history. Each call's last-position logits are compared
with the reference's (the eager float32 model run the same way, once):

- cosine of the logit vectors, mean and lowest over positions;
- top-1 agreement: the share of positions whose arg-max token is the reference's;
- perplexity on the text's next tokens, exp(mean negative log-likelihood), of both and their ratio.

The text is the built-in corpus (examples/data/corpus.txt) through the tokenizer the artifact stores;
without one, fixed pseudo-random ids. DECODER_BUDGETS holds what each dtype must reach; the conversion
judges weight-only decoders by it (api.py) and the weight-only accuracy guard moves layers back to float
until it holds (quant/weight_only_guard.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch
import torch.nn.functional as F

from .accuracy import flatten_outputs
from .errors import UserInputError
from .examples.corpus import CORPUS_FILE, corpus_text
from .ir.ops._kv_int8 import from_cache
from .ir.spec import TensorSpec
from .manifest import DecoderAccuracy, DecoderRecord
from .runtime.decoder import empty_cache

if TYPE_CHECKING:
    from .runtime.model import LoadedModel

DEFAULT_POSITIONS = 128  # next-token predictions compared: about a second of tiny-llama, seconds of a 0.5B model
DEFAULT_PREFILL = 16  # the first call's prompt: its logits judge the prefill path, its cache every later step
IDS_SEED = 0  # the fixed ids of a decoder without a tokenizer

JUDGED_BY = "teacher-forced logits: mean cosine, top-1 agreement and perplexity ratio"
Step = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]  # one model call: inputs -> outputs by name


@dataclass(frozen=True)
class DecoderBudget:
    """What a decoder's teacher-forced comparison must reach."""

    min_mean_cosine: float
    min_top1_agreement: float
    max_perplexity_ratio: float

    def with_overrides(self, min_mean_cosine: Optional[float] = None, min_top1_agreement: Optional[float] = None,
                       max_perplexity_ratio: Optional[float] = None) -> "DecoderBudget":
        """This budget with the fields a user set (None keeps the default)."""
        return DecoderBudget(self.min_mean_cosine if min_mean_cosine is None else min_mean_cosine,
                             self.min_top1_agreement if min_top1_agreement is None else min_top1_agreement,
                             self.max_perplexity_ratio if max_perplexity_ratio is None else max_perplexity_ratio)


# Per dtype. int8 / int4 are weight-only (the conversion judges those); fp32 and bf16 are here for measure_decoder().
# The tiny-llama folder (random weights: nearly flat logits, whose arg-max a small change flips) measured on the corpus:
# int8 mean cosine 0.99996, top-1 0.977, perplexity ratio 0.9996; int4 g128 0.983 / 0.711 / 1.0036, g32 0.991 / 0.727,
# with the LM head quantized too 0.977 / 0.711 (docs/decoders.md). So int4's top-1 budget catches a broken layer
# (agreement near 0), not rounding; cosine and perplexity judge the rest. Real checkpoints, with peaked logits, agree more.
DECODER_BUDGETS: dict[str, DecoderBudget] = {
    "fp32": DecoderBudget(0.99999, 0.99, 1.001),
    "bf16": DecoderBudget(0.99, 0.9, 1.05),
    "int8": DecoderBudget(0.99, 0.9, 1.02),
    "int4": DecoderBudget(0.97, 0.5, 1.2),
}


@dataclass(frozen=True)
class TokenSequence:
    ids: list[int]
    text: str  # where they come from, for the record


def token_sequence(tokenizer: Any, vocab_size: int, length: int) -> TokenSequence:
    """Up to `length` ids: the corpus through `tokenizer` (a `tokenizers.Tokenizer`), or fixed ids without one."""
    if tokenizer is None:
        generator = torch.Generator().manual_seed(IDS_SEED)
        return TokenSequence(torch.randint(0, vocab_size, (length,), generator=generator).tolist(),
                             f"pseudo-random ids (seed {IDS_SEED}): no tokenizer stored")
    # Ids past the logits' rows (a tokenizer with more added tokens than the model has rows) cannot be scored.
    ids = [i for i in tokenizer.encode(corpus_text()).ids if 0 <= i < vocab_size]
    return TokenSequence(ids[:length], f"{CORPUS_FILE} through the stored tokenizer")


@dataclass(frozen=True)
class TeacherForcedReference:
    """A token sequence and the reference's logits along it, computed once, to judge any artifact of the model."""

    record: DecoderRecord
    ids: torch.Tensor  # int64 [1, prefill + positions]: the last id is only a target
    prefill: int
    text: str
    logits: torch.Tensor  # float32 [positions, vocab]
    reference: str

    @property
    def positions(self) -> int:
        return self.logits.shape[0]

    def judge(self, model: "LoadedModel", budget: DecoderBudget) -> DecoderAccuracy:
        """Drive `model` (a decoder artifact of the same signature) over the sequence and compare."""
        inputs = {io.name: io.spec for io in model.signature.inputs}
        got = teacher_forced_logits(model.run_dict, self.record, empty_cache(self.record, inputs, 1, str(model.path)),
                                    self.ids, self.prefill)
        return compare(got, self.logits, self.ids[0, self.prefill:], budget, self.reference, self.text, self.prefill)


@dataclass(frozen=True)
class TeacherForcedCheck:
    """A reference and the budget a decoder artifact must reach against it (the conversion's check and guard)."""

    reference: TeacherForcedReference
    budget: DecoderBudget

    def judge(self, model: "LoadedModel") -> DecoderAccuracy:
        return self.reference.judge(model, self.budget)


def teacher_forced_logits(step: Step, record: DecoderRecord, cache: dict[str, torch.Tensor], ids: torch.Tensor,
                          prefill: int) -> torch.Tensor:
    """float32 [positions, vocab]: the last-position logits of a prefill call on ids[:, :prefill], then of one call
    per true next token, each with the cache the previous call returned (positions = ids.shape[1] - prefill)."""
    rows = []
    chunks = [ids[:, :prefill], *(ids[:, i:i + 1] for i in range(prefill, ids.shape[1] - 1))]
    for chunk in chunks:
        outputs = step({record.input_ids: chunk, **cache})
        rows.append(outputs[record.logits][0, -1].float().cpu())  # a GPU artifact's too: compared on the CPU
        cache = {past: outputs[present] for past, present in record.cache}
    return torch.stack(rows)


def eager_step(eager: Callable[..., Any], output_names: list[str]) -> Step:
    """A call of the eager oracle (keyword inputs, outputs in the graph's order) as a Step."""
    def step(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return dict(zip(output_names, flatten_outputs(eager(**inputs))))

    return step


def prepare_reference(eager: Callable[..., Any], record: DecoderRecord, inputs: dict[str, TensorSpec],
                      outputs: dict[str, TensorSpec], max_positions: int, tokenizer: Any, reference: str,
                      positions: int = DEFAULT_POSITIONS, prefill: int = DEFAULT_PREFILL) -> TeacherForcedReference:
    """The sequence (within the model's `max_positions`) and the eager float32 model's logits along it. `inputs` and
    `outputs`: the signature's specs by name, outputs in the graph's order (the order eager returns them in)."""
    vocab = outputs[record.logits].shape[-1]
    if not isinstance(vocab, int):
        raise UserInputError(f"the logits output {record.logits} has no fixed vocabulary size ({vocab})",
                             "convert a model whose LM head has a fixed number of rows")
    sequence = token_sequence(tokenizer, vocab, min(prefill + positions, max_positions + 1))
    if len(sequence.ids) < 2:
        raise UserInputError(f"the decoder check needs at least 2 tokens of text, and {sequence.text} gave "
                             f"{len(sequence.ids)}", "check the tokenizer stored with the model (tokenizer.json)")
    prefill = max(1, min(prefill, len(sequence.ids) - 1))
    ids = torch.tensor([sequence.ids], dtype=torch.int64)
    # The reference computes in float32, whatever the artifact's cache dtype.
    cache = {k: from_cache(v, torch.float32) for k, v in empty_cache(record, inputs, 1, "the model").items()}
    logits = teacher_forced_logits(eager_step(eager, list(outputs)), record, cache, ids, prefill)
    return TeacherForcedReference(record, ids, prefill, sequence.text, logits, reference)


def compare(got: torch.Tensor, want: torch.Tensor, targets: torch.Tensor, budget: DecoderBudget, reference: str,
            text: str, prefill: int) -> DecoderAccuracy:
    """The record of logits `got` against `want` ([positions, vocab]) whose true next tokens are `targets`."""
    g, w, t = got.double(), want.double(), targets.reshape(-1).long()
    cosines = F.cosine_similarity(g, w, dim=1, eps=1e-300)
    top1 = float((g.argmax(1) == w.argmax(1)).double().mean())
    perplexity = float(F.cross_entropy(g, t).exp())  # inf, not an OverflowError, for logits far off
    reference_perplexity = float(F.cross_entropy(w, t).exp())
    ratio = perplexity / reference_perplexity if reference_perplexity > 0 else math.nan
    mean, lowest = float(cosines.mean()), float(cosines.min())
    passed = (mean >= budget.min_mean_cosine and top1 >= budget.min_top1_agreement
              and ratio <= budget.max_perplexity_ratio)  # NaN anywhere fails every comparison
    return DecoderAccuracy(
        reference=reference, text=text, prefill_tokens=prefill, positions=g.shape[0], mean_cosine=mean,
        min_cosine=lowest, top1_agreement=top1, perplexity=perplexity, reference_perplexity=reference_perplexity,
        perplexity_ratio=ratio, budget_mean_cosine=budget.min_mean_cosine,
        budget_top1_agreement=budget.min_top1_agreement, budget_perplexity_ratio=budget.max_perplexity_ratio,
        passed=passed)


def describe_failure(record: DecoderAccuracy) -> str:
    """What missed its budget, for the "too far" message."""
    misses = []
    if not record.mean_cosine >= record.budget_mean_cosine:
        misses.append(f"mean logits cosine {record.mean_cosine:.6f} (budget {record.budget_mean_cosine:g})")
    if not record.top1_agreement >= record.budget_top1_agreement:
        misses.append(f"top-1 agreement {record.top1_agreement:.3f} (budget {record.budget_top1_agreement:g})")
    if not record.perplexity_ratio <= record.budget_perplexity_ratio:
        misses.append(f"perplexity ratio {record.perplexity_ratio:.4f} (budget {record.budget_perplexity_ratio:g})")
    return (f"teacher-forced over {record.positions} positions of {record.text}: "
            + ("; ".join(misses) or "within budget"))


def measure_decoder(model: "LoadedModel", eager: Callable[..., Any], budget: Optional[DecoderBudget] = None,
                    positions: int = DEFAULT_POSITIONS, prefill: int = DEFAULT_PREFILL,
                    reference: str = "eager PyTorch fp32") -> DecoderAccuracy:
    """A loaded decoder artifact against `eager` (the float model as the conversion's oracle calls it: keyword inputs,
    outputs logits then the present cache; e.g. `OptimizeResult.source.eager`), on the corpus through the artifact's
    stored tokenizer. `budget`: the artifact's dtype's DECODER_BUDGETS entry unless given."""
    decoder = model.decoder  # checks the decoder record against the signature, reads the stored tokenizer
    inputs = {io.name: io.spec for io in model.signature.inputs}
    outputs = {io.name: io.spec for io in model.signature.outputs}
    prepared = prepare_reference(eager, decoder.record, inputs, outputs, decoder.max_positions, decoder.tokenizer,
                                 reference, positions, prefill)
    return prepared.judge(model, budget or DECODER_BUDGETS[model.manifest.dtype])
