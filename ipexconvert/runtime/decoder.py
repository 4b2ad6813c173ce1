"""generate(): token-by-token decoding over a causal-LM artifact with its KV cache as inputs/outputs.

The artifact's graph maps (input_ids, past cache) -> (logits, present cache) (the signature of
frontend/decoder_signature.py; logits of the last position or of every new one: the last is read). The prompt runs once (prefill, past = 0); each new token runs with
the previous call's present cache as its past. The cache lives in buffers with room to grow: the
`kv_append` kernels write the new positions in place instead of copying the cache every token.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence, Union

import torch

from ..errors import ArtifactError, UserInputError
from ..ir import dtypes
from ..ir.spec import TensorSpec
from ..manifest import DecoderRecord

if TYPE_CHECKING:
    from .model import LoadedModel

Prompt = Union[str, Sequence[str], Sequence[int], Sequence[Sequence[int]], torch.Tensor]


@dataclass
class SamplingSettings:
    """temperature 0: greedy (arg-max, the lowest id on ties); otherwise sample from softmax(logits / temperature)
    restricted to the top_k most likely ids (0: all) and to the smallest set whose probability reaches top_p."""

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: Optional[int] = None
    stop_at_eos: bool = True

    def check(self) -> None:
        if self.max_new_tokens < 1:
            raise UserInputError(f"max_new_tokens={self.max_new_tokens}", "ask for at least one new token")
        if not self.temperature >= 0.0:
            raise UserInputError(f"temperature={self.temperature}", "use 0 (greedy) or a positive temperature")
        if self.top_k < 0:
            raise UserInputError(f"top_k={self.top_k}", "use 0 (no limit) or a positive count")
        if not 0.0 < self.top_p <= 1.0:
            raise UserInputError(f"top_p={self.top_p}", "use a probability in (0, 1]")


@dataclass
class Generation:
    """What generate() returns: the new token ids per sequence, their text (with a tokenizer), and timings."""

    prompt_ids: list[list[int]]
    new_ids: list[list[int]]
    text: Optional[list[str]] = None
    prefill_seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)  # one per decode step after the first token
    stopped_by: str = "max_new_tokens"

    @property
    def decode_ms_per_token(self) -> Optional[float]:
        return 1000.0 * statistics.median(self.step_seconds) if self.step_seconds else None


class Decoder:
    """A loaded decoder artifact's generation loop (LoadedModel.generate / .stream)."""

    def __init__(self, model: "LoadedModel", record: DecoderRecord, tokenizer_json: Optional[bytes]):
        self.model, self.record = model, record
        self._check_signature()
        self.tokenizer = load_tokenizer(tokenizer_json, model.path) if tokenizer_json is not None else None
        dim = model.signature.dims[record.cache_dim]
        self.max_positions = dim.max + 1  # the cache holds up to dim.max positions before the last token's

    def _check_signature(self) -> None:
        sig, r = self.model.signature, self.record
        inputs = {io.name: io.spec for io in sig.inputs}
        outputs = {io.name: io.spec for io in sig.outputs}

        def refuse(why: str) -> ArtifactError:
            return ArtifactError(f"{self.model.path}: the decoder record does not match the graph ({why})",
                                 "re-create the artifact with `ipexconvert optimize`")

        ids = inputs.get(r.input_ids)
        if ids is None or ids.dtype != "int64" or ids.rank != 2:
            raise refuse(f"{r.input_ids} is not an int64 [batch, seq] input")
        logits = outputs.get(r.logits)
        if logits is None or logits.rank != 3 or logits.shape[1] not in (1, ids.shape[1]):
            raise refuse(f"{r.logits} is not a [batch, 1, vocab] output (nor [batch, seq, vocab])")
        if r.cache_dim not in sig.dims or sig.dims[r.cache_dim].min != 0:
            raise refuse(f"the cache dim {r.cache_dim} is not a dynamic dim starting at 0")
        names = [n for pair in r.cache for n in pair]
        if not r.cache or len(set(names)) != len(names):
            raise refuse("the cache pairs are empty or name a tensor twice")
        if {p for p, _ in r.cache} | {r.input_ids} != set(inputs):
            raise refuse("the inputs are not input_ids and the cache")
        for past, present in r.cache:
            spec, out = inputs.get(past), outputs.get(present)
            if spec is None or spec.rank != 4 or spec.shape[0] != ids.shape[0] or spec.shape[2] != r.cache_dim:
                raise refuse(f"{past} is not a [{ids.shape[0]}, heads, {r.cache_dim}, head_dim] input")
            if out is None or out.rank != 4 or out.dtype != spec.dtype:
                raise refuse(f"{present} is not a rank-4 {spec.dtype} output")

    # ---- prompts and tokens -------------------------------------------------------------------------------------------

    def encode(self, prompt: Prompt) -> torch.Tensor:
        """A prompt as int64 ids [batch, n]: text (one string, or a list of them: a batch) through the stored
        tokenizer, or ids as given ([n], [batch, n], or a list of lists). The rows have one length here (the cache
        has one length for every row); encode_rows takes rows of any lengths."""
        rows = self.encode_rows(prompt)
        lengths = sorted({len(row) for row in rows})
        if len(lengths) > 1:
            raise UserInputError(f"a batch of {len(rows)} prompts of different lengths ({', '.join(map(str, lengths))} "
                                 "tokens) as one tensor: the rows of a batch share one cache length",
                                 "generate() and stream() take them as they are (each row stepped with a cache of "
                                 "its own), or encode them one at a time")
        return torch.stack(rows)

    def encode_rows(self, prompt: Prompt) -> list[torch.Tensor]:
        """A prompt as one int64 ids tensor [n_i] per row: as encode(), but the rows may differ in length."""
        texts = [prompt] if isinstance(prompt, str) else prompt
        if isinstance(texts, (list, tuple)) and texts and all(isinstance(t, str) for t in texts):
            if self.tokenizer is None:
                raise UserInputError("this artifact stores no tokenizer, so it takes token ids, not text",
                                     "pass the prompt as a list of token ids (or convert from a folder with tokenizer.json)")
            prompt = [self.tokenizer.encode(t).ids for t in texts]
        if isinstance(prompt, (list, tuple)) and not prompt:
            raise UserInputError("the prompt is empty", "give at least one token")
        if isinstance(prompt, (list, tuple)) and all(isinstance(row, (list, tuple)) for row in prompt):
            rows = [self._ids(row) for row in prompt]
            if any(row.shape[0] != 1 for row in rows):
                raise UserInputError("a prompt row that is itself a list of rows",
                                     "pass one list of ids per row: [[1, 2, 3], [4, 5]]")
            return [row[0] for row in rows]
        return list(self._ids(prompt))

    def _ids(self, prompt) -> torch.Tensor:
        """Ids as given, as int64 [batch, n] (a row [n] becomes a batch of one)."""
        if isinstance(prompt, (list, tuple)) and not prompt:
            raise UserInputError("the prompt is empty", "give at least one token")
        try:
            ids = torch.as_tensor(prompt)
        except (TypeError, ValueError, RuntimeError) as e:  # e.g. a list mixing ids and lists
            raise UserInputError(f"the prompt is not text or token ids ({' '.join(str(e).split())})",
                                 "pass a string, a list of strings, a list of ints, or an int64 tensor [n] or [batch, n]") from None
        if ids.dtype not in (torch.int64, torch.int32) or ids.dim() not in (1, 2):
            raise UserInputError(f"prompt ids of dtype {ids.dtype} and shape {tuple(ids.shape)}",
                                 "pass a list of ints, or an int64 tensor [n] or [batch, n]")
        ids = ids.to(torch.int64)
        ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
        if ids.shape[1] < 1:
            raise UserInputError("the prompt is empty", "give at least one token")
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        if self.tokenizer is None:
            raise UserInputError("this artifact stores no tokenizer", "read the token ids instead of the text")
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    # ---- the loop ---------------------------------------------------------------------------------------------------

    def stream(self, prompt: Prompt, settings: SamplingSettings, on_step: Optional[Callable[[float], None]] = None
               ) -> Iterator[torch.Tensor]:
        """Yields the next token ids [batch] as they are chosen. on_step(seconds) after every model call. Prompts
        of different lengths run row by row (RowByRow), the rest as one batch."""
        yield from self._stream_rows(self.encode_rows(prompt), settings, on_step)

    def _stream_rows(self, rows: list[torch.Tensor], settings: SamplingSettings,
                     on_step: Optional[Callable[[float], None]]) -> Iterator[torch.Tensor]:
        """stream() of prompts already encoded (encode_rows)."""
        settings.check()
        batch, length = len(rows), max(len(row) for row in rows)
        if length + settings.max_new_tokens > self.max_positions:
            raise UserInputError(f"{length} prompt tokens + {settings.max_new_tokens} new ones exceed the model's "
                                 f"{self.max_positions} positions", "shorten the prompt or ask for fewer tokens")
        generator = torch.Generator().manual_seed(settings.seed) if settings.seed is not None else None
        total = length + settings.max_new_tokens
        ragged = len({len(row) for row in rows}) > 1
        static = None if ragged else self.model.static_cache
        # One generation at a time owns the static buffers; another thread's meanwhile grows caches of its own.
        owns_static = static is not None and static.in_use.acquire(blocking=False)
        try:
            if ragged:  # no padding: each row its own cache, the rows stepped together
                chosen = self._stepped(RowByRow(self, len(rows)), rows, total, settings, generator)
            elif owns_static and static.pipelines and settings.temperature == 0.0:
                # greedy over a GPU's static cache: the next step is queued before this one's ids are read back
                chosen = static.greedy(torch.stack(rows), total, self.device, settings.max_new_tokens)
            else:
                steps = static if owns_static else GrowingCache(self)
                chosen = self._stepped(steps, torch.stack(rows), total, settings, generator)
            done = torch.zeros(batch, dtype=torch.bool)
            eos = torch.tensor(self.record.eos_token_ids, dtype=torch.int64)
            start = time.perf_counter()
            for next_ids in chosen:
                if on_step is not None:
                    on_step(time.perf_counter() - start)
                if settings.stop_at_eos and eos.numel():
                    next_ids = torch.where(done, eos[0], next_ids)  # finished rows keep emitting eos
                    done |= torch.isin(next_ids, eos)
                yield next_ids
                if settings.stop_at_eos and eos.numel() and bool(done.all()):
                    return
                start = time.perf_counter()
        finally:  # (also when the caller drops the stream early: closing the generator runs this)
            if owns_static:
                static.in_use.release()

    def _stepped(self, steps, ids, total: int, settings: SamplingSettings,
                 generator: Optional[torch.Generator]) -> Iterator[torch.Tensor]:
        """The ids chosen at each step [batch], one model call after another. (A finished row is fed its own
        choice, not the eos stream() shows for it: rows never mix, so the others do not change.)"""
        logits = steps.start(ids, total, self.device)
        for step in range(settings.max_new_tokens):
            # chosen on the CPU (a GPU's logits are copied over): the same ids for the same seed on every device
            next_ids = _choose(logits[:, -1, :].float().cpu(), settings, generator)
            yield next_ids
            if step + 1 < settings.max_new_tokens:
                logits = steps.advance(next_ids.unsqueeze(1))

    def generate(self, prompt: Prompt, settings: SamplingSettings) -> Generation:
        rows = self.encode_rows(prompt)
        times: list[float] = []
        new = [step for step in self._stream_rows(rows, settings, on_step=times.append)]
        new_ids = torch.stack(new, dim=1).tolist() if new else [[] for _ in rows]
        eos = set(self.record.eos_token_ids)
        if settings.stop_at_eos and eos:  # cut each row after its first eos
            new_ids = [_until_eos(row, eos) for row in new_ids]
        stopped = "eos" if settings.stop_at_eos and eos and all(r and r[-1] in eos for r in new_ids) else "max_new_tokens"
        text = [self.decode(row) for row in new_ids] if self.tokenizer is not None else None
        return Generation(prompt_ids=[row.tolist() for row in rows], new_ids=new_ids, text=text,
                          prefill_seconds=times[0] if times else 0.0, step_seconds=times[1:], stopped_by=stopped)

    def _empty_cache(self, batch: int) -> dict[str, torch.Tensor]:
        return empty_cache(self.record, {io.name: io.spec for io in self.model.signature.inputs}, batch,
                           str(self.model.path))

    @property
    def device(self) -> torch.device:
        return self.model.backend.torch_device()


class GrowingCache:
    """The artifact's own steps: each call takes the past cache and returns the present one (the CPU's kv_append
    kernels grow it in place inside a buffer with spare positions). runtime/static_cache.py has the same methods."""

    def __init__(self, decoder: Decoder):
        self.decoder, self.model, self.record = decoder, decoder.model, decoder.record
        self.past: dict[str, torch.Tensor] = {}
        self.bind_steps = True  # (False: every step through the executor, for comparisons)

    def start(self, ids: torch.Tensor, total: int, device: torch.device) -> torch.Tensor:
        self.past = self.decoder._empty_cache(ids.shape[0])
        return self.advance(ids)

    def advance(self, ids: torch.Tensor) -> torch.Tensor:
        # The float inputs are the caches this loop made (empty at first): the NaN/Inf scan has nothing to find
        # there that the model did not put there itself, and scanning them cost 1.5 ms a bf16 token.
        # One-token steps differ only in the cache length: on the CPU they run from a plan bound once.
        varying = frozenset({self.record.cache_dim}) if ids.shape[1] == 1 and self.bind_steps else frozenset()
        outputs = self.model.run_dict({self.record.input_ids: ids, **self.past}, scan_nan=False, varying=varying)
        self.past = {p: outputs[o] for p, o in self.record.cache}
        return outputs[self.record.logits]


class RowByRow:
    """A batch of prompts of different lengths: no padding, so each row grows a cache of its own (GrowingCache) and
    the rows step together, each step's logits stacked into one batch for the sampler (the same choices as a batch
    of one length). Each row is a call of its own, so the batch takes the sum of its rows' times; the steps run
    through the executor (a plan bound for one row's cache would be bound again for the next row's every step)."""

    def __init__(self, decoder: Decoder, rows: int):
        self.caches = [GrowingCache(decoder) for _ in range(rows)]
        for cache in self.caches:
            cache.bind_steps = False

    def start(self, rows: list[torch.Tensor], total: int, device: torch.device) -> torch.Tensor:
        return torch.cat([cache.start(row.unsqueeze(0), total, device)[:, -1:]
                          for cache, row in zip(self.caches, rows)])

    def advance(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.cat([cache.advance(ids[i:i + 1])[:, -1:] for i, cache in enumerate(self.caches)])


def empty_cache(record: DecoderRecord, inputs: dict[str, TensorSpec], batch: int, where: str) -> dict[str, torch.Tensor]:
    """The cache of no positions for `batch` sequences, shaped and typed as the cache inputs' specs say
    ([batch, kv_heads, cache_dim, head_dim]: axis 0 is the batch, whatever its dim is called)."""
    cache = {}
    for past, _ in record.cache:
        spec = inputs[past]
        shape = [batch if axis == 0 else 0 if d == record.cache_dim else d for axis, d in enumerate(spec.shape)]
        if not all(isinstance(d, int) for d in shape):
            raise ArtifactError(f"{where}: cache input {past} has a dim other than the batch and "
                                f"{record.cache_dim} that is not fixed ({spec.describe()})",
                                "re-create the artifact with `ipexconvert optimize`")
        cache[past] = torch.zeros(shape, dtype=dtypes.to_torch(spec.dtype))
    return cache


def _until_eos(row: list[int], eos: set[int]) -> list[int]:
    for i, token in enumerate(row):
        if token in eos:
            return row[:i + 1]
    return row


def _choose(logits: torch.Tensor, s: SamplingSettings, generator: Optional[torch.Generator]) -> torch.Tensor:
    """The next id per row of logits [batch, vocab]."""
    if s.temperature == 0.0:
        # numpy's argmax is vectorised (53 us for 4 rows of Qwen2's 151936 logits, torch's 521 us); both give the first
        # largest value, or the first NaN
        return torch.from_numpy(logits.numpy().argmax(axis=-1))
    scores = logits / s.temperature
    if 0 < s.top_k < scores.shape[-1]:
        kth = torch.topk(scores, s.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if s.top_p < 1.0:
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative - sorted_scores.softmax(dim=-1) >= s.top_p  # keep the tokens before the mass reaches top_p
        scores = scores.scatter(-1, order, sorted_scores.masked_fill(drop, float("-inf")))
    probabilities = scores.softmax(dim=-1)
    if not bool(torch.isfinite(probabilities).all()):
        raise ArtifactError("the model's logits hold NaN or infinite values, so no token can be sampled from them",
                            "check the artifact against its source (`ipexconvert check`), or decode greedily "
                            "(temperature 0 picks the first largest or NaN logit)")
    return torch.multinomial(probabilities, 1, generator=generator).squeeze(1)


def load_tokenizer(blob: bytes, path) -> object:
    """The stored tokenizer.json, parsed by the tokenizers library (a JSON description, no code)."""
    try:
        from tokenizers import Tokenizer
    except ModuleNotFoundError:
        raise UserInputError("text prompts need the tokenizers package", "pip install tokenizers, or pass token ids") from None
    try:
        return Tokenizer.from_str(blob.decode("utf-8"))
    except Exception as e:  # the library raises its own exception types for malformed JSON
        raise ArtifactError(f"{path}: the stored tokenizer.json cannot be read ({str(e)[:200]})",
                            "re-create the artifact from a folder with a valid tokenizer.json") from None
