"""The `ipexconvert` command: optimize, inspect, run, bench, check, doctor.

Every command turns ipexconvert errors into a two-line message (problem, fix) and an
exit code: 0 ok, 1 accuracy regression, 2 usage or input error, 3 internal error.
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import signal
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, Optional

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column, Table
from rich.text import Text

from . import environment
from .errors import IpexConvertError, UserInputError
from .output_path import WriteLedger, check_writable, scratch_folder, write_errors

if TYPE_CHECKING:  # imported where used (quant.plan imports torch, which a command loads only when it needs it)
    from .quant.plan import LayerPlan, QuantPlan

# torchao (installed with neural-compressor-pt, imported by transformers whenever it is present) logs on every import
# that its CUDA extensions do not load on this CPU build and that its enums need no pytree registration: noise on
# every command, nothing the user can act on. The CLI owns its process, so it raises those two loggers to ERROR.
for _noisy in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_noisy).setLevel(logging.ERROR)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Convert PyTorch models into fast, safe single-file artifacts (.ipxc) and run them.")
out = Console()
# Messages go out whole (the terminal wraps them): a path or a command in an error must survive copy and paste,
# and rich would break it at the console width (80 columns when stderr is no terminal).
err = Console(stderr=True, soft_wrap=True)
# The files the running command may write (-o, --qconfig-out, --junit), so that an interrupt can say
# which of them now exist complete (every writer renames a finished temp file into place).
written = WriteLedger()


class Terminated(KeyboardInterrupt):
    """SIGTERM as an exception, so that `finally` blocks remove temp files before the process ends."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)


class _StopSignals:
    """While a command runs (main thread only), SIGINT and SIGTERM raise inside it, then the old handlers return.

    Python drops (prints as "ignored") an exception raised in a weakref callback or __del__, and a
    signal can land there; such a signal is delivered again 10 ms later, outside that callback."""

    def __enter__(self):
        self.saved = None
        if threading.current_thread() is threading.main_thread():
            self.saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
            self.hook, self.again = sys.unraisablehook, signal.SIGINT
            signal.signal(signal.SIGINT, _stop)
            signal.signal(signal.SIGTERM, _stop)
            signal.signal(signal.SIGALRM, lambda _s, frame: _stop(self.again, frame))
            sys.unraisablehook = self._swallowed
        return self

    def _swallowed(self, unraisable) -> None:
        e = unraisable.exc_value
        if not isinstance(e, KeyboardInterrupt):
            return self.hook(unraisable)
        self.again = e.signum if isinstance(e, Terminated) else signal.SIGINT
        signal.setitimer(signal.ITIMER_REAL, 0.01)

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.unraisablehook = self.hook
            for s, handler in self.saved.items():
                signal.signal(s, handler)


def _interrupted_message(e: KeyboardInterrupt) -> tuple[str, int]:
    what, code = ("terminated", 128 + e.signum) if isinstance(e, Terminated) else ("interrupted", 130)
    done = written.written()
    if not done:
        return f"{what}; nothing was written", code
    names = ", ".join(str(p) for p in done)
    return f"{what}; {names} had already been written and is complete", code


def handle_errors(fn: Callable) -> Callable:
    """Bad input ends in a clear message and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        _quiet_third_party_progress()
        global written
        written = WriteLedger()
        try:
            with _StopSignals():
                return fn(*args, **kwargs)
        except IpexConvertError as e:
            err.print(f"[bold red]error:[/] {_show(e.problem, keep_newlines=True)}", highlight=False)
            if e.fix:
                err.print(f"  [bold]fix:[/] {_show(e.fix, keep_newlines=True)}", highlight=False)
            raise typer.Exit(e.exit_code)
        except KeyboardInterrupt as e:
            message, code = _interrupted_message(e)
            err.print(escape(message), highlight=False)
            raise typer.Exit(code)
        except (typer.Exit, typer.Abort):
            raise
        except Exception as e:  # a bug in ipexconvert, not the user's fault
            if environment.get("IPEXCONVERT_DEBUG"):
                raise
            err.print(f"[bold red]internal error:[/] {type(e).__name__}: {escape(str(e))}", highlight=False)
            err.print("  this is a bug in ipexconvert; rerun with IPEXCONVERT_DEBUG=1 for the traceback and report it")
            raise typer.Exit(3)

    return wrapper


def _quiet_third_party_progress() -> None:
    """Our live display owns stderr: transformers' tqdm bars ("Loading weights") would tear it and bury errors."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers is first imported
    if "transformers" in sys.modules:  # already imported (in-process use): switch its bars off directly
        sys.modules["transformers"].utils.logging.disable_progress_bar()


# Characters that must not reach a terminal raw: C0/C1 controls (escape sequences, carriage returns), the
# invisible bidi and zero-width formatting marks, and lone surrogates (unencodable: printing one raises).
_OTHER_UNPRINTABLE = r"\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ud800-\udfff"
_UNPRINTABLE = re.compile(rf"[\x00-\x1f{_OTHER_UNPRINTABLE}]")
_UNPRINTABLE_BUT_NEWLINES = re.compile(rf"[\x00-\x09\x0b-\x1f{_OTHER_UNPRINTABLE}]")
_MAX_SHOWN = 2000  # characters of one printed string: rich wraps a long unbroken line in quadratic time


def _show(value: Any, keep_newlines: bool = False) -> str:
    """Text from an artifact, a path or an error, ready to print with markup on: unprintable characters as
    escapes (\\x1b, \\ud800) and rich markup escaped, so a name can neither break the output nor restyle it;
    cut at _MAX_SHOWN characters (--json has the whole text)."""
    text = str(value)
    pattern = _UNPRINTABLE_BUT_NEWLINES if keep_newlines else _UNPRINTABLE
    shown = pattern.sub(lambda m: ascii(m.group())[1:-1], text[:_MAX_SHOWN])
    if len(shown) > _MAX_SHOWN or len(text) > _MAX_SHOWN:
        shown = f"{shown[:_MAX_SHOWN]}... ({len(text)} characters in all)"
    return escape(shown)


def _accuracy_line(acc: dict) -> str:
    """One output's accuracy numbers: element-wise, then per sample where the output has samples."""
    text = f"max rel error {acc['max_rel_error']:.2e}, cosine {acc['cosine']:.6f}"
    if acc.get("sample_cosine_min") is not None and acc.get("sample_cosine_mean") is not None:
        text += f", sample cosine min {acc['sample_cosine_min']:.6f} mean {acc['sample_cosine_mean']:.6f}"
    if acc.get("neighbour_agreement") is not None:
        text += f", nearest neighbour kept {acc['neighbour_agreement']:.0%}"
    return text


def _print_decoder_accuracy(manifest: dict) -> None:
    """A weight-only artifact's codes (which algorithm), a decoder's teacher-forced accuracy and what the guard moved to
    float (manifest as JSON: inspect reads untrusted files, so every string goes through _show)."""
    from .inspection import decoder_accuracy_line, weight_only_codes_line, weight_only_guard_lines

    if manifest.get("weight_only"):
        out.print(f"[bold]weight-only codes[/]: {_show(weight_only_codes_line(manifest['weight_only']))}", highlight=False)
    accuracy = manifest.get("accuracy") or {}
    if accuracy.get("decoder"):
        out.print(f"[bold]teacher-forced accuracy[/]: {_show(decoder_accuracy_line(accuracy['decoder']))}", highlight=False)
    if manifest.get("weight_only_guard"):
        first, *layers = weight_only_guard_lines(manifest["weight_only_guard"])
        out.print(f"[bold]weight-only guard[/]: {_show(first)}", highlight=False)
        for line in layers:
            out.print(f"  {_show(line)}", highlight=False)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def _json_safe(value: Any) -> Any:
    """Non-finite floats (an output whose shape differs from the reference) become null: --json must stay valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


# --------------------------------------------------------------------------- int8 flags
@dataclass(frozen=True)
class Int8Flag:
    """An int8-only optimize flag: its spelling, the QuantOptions field it sets (None: an optimize()
    keyword), what it accepts (for error messages), and how a CLI value becomes the field's value."""

    flag: str
    field: Optional[str]
    accepts: str
    convert: Callable[[Any], Any] = lambda v: v


INT8_PANEL = "int8 (--dtype int8 only)"
WOQ_PANEL = "weight-only (--dtype int4, or --dtype int8 --weight-only)"
# optimize() parameter -> flag. A flag counts as given when its value is not None/False.
INT8_FLAGS: dict[str, Int8Flag] = {
    "calib": Int8Flag("--calib", None, "a .safetensors file or a folder of them"),
    "calib_text": Int8Flag("--calib-text", None, "a UTF-8 text file, one sentence a line"),
    "calib_synthetic": Int8Flag("--calib-synthetic", None, "a number of random batches, at least 1"),
    "observer": Int8Flag("--observer", "observer", "minmax, percentile or histogram"),
    "smoothquant": Int8Flag("--smoothquant", "smoothquant", "auto, off, or a fixed alpha in [0, 1]"),
    "max_error": Int8Flag("--max-error", "max_error", "a positive number: the guard metric's budget"),
    "guard_metric": Int8Flag("--guard-metric", "guard_metric", "auto, cosine, relative or top1"),
    "no_guard": Int8Flag("--no-guard", "guard", "no value", convert=lambda v: not v),
    "qconfig_out": Int8Flag("--qconfig-out", None, "a path for the JSON quantization plan"),
    "qconfig_in": Int8Flag("--qconfig-in", "qconfig_in", "a qconfig JSON file written by --qconfig-out"),
    "float_dtype": Int8Flag("--float-dtype", "float_dtype", "auto, float32 or bfloat16",
                            convert=lambda v: None if v == "auto" else v),  # QuantOptions: None means auto
    "tune": Int8Flag("--tune", None, "no value (needs --eval-fn)"),
    "eval_fn": Int8Flag("--eval-fn", None, "package.module:function(model) -> score, higher is better"),
    "tolerable_loss": Int8Flag("--tolerable-loss", None, "a relative loss of the fp32 score, e.g. 0.01"),
}


def _tune_settings(values: dict[str, Any]):
    """TuneSettings for --tune (None without it); --eval-fn is imported now, before any slow work."""
    from .importing import import_callable
    from .quant.convert import TuneSettings

    if not values.get("tune"):
        if values.get("eval_fn") or values.get("tolerable_loss") is not None:
            raise UserInputError("--eval-fn and --tolerable-loss only apply with --tune", "add --tune")
        return None
    if not values.get("eval_fn"):
        raise UserInputError("--tune needs --eval-fn package.module:function",
                             "write a function that takes the loaded model and returns a score (higher is better)")
    loss = values.get("tolerable_loss")
    if loss is not None and not 0 <= loss < 1:
        raise UserInputError(f"--tolerable-loss {loss}", "pass a relative loss in [0, 1), e.g. 0.01 for 1%")
    return TuneSettings(eval_fn=import_callable(values["eval_fn"], "--eval-fn"),
                        tolerable_loss=0.01 if loss is None else loss)


def _quant_options(dtype: str, values: dict[str, Any]):
    """QuantOptions from the int8 flags (None for other dtypes); every mistake is a usage error, found
    before any slow work."""
    from pydantic import ValidationError

    from .quant.observers import OBSERVERS
    from .quant.options import QuantOptions

    given = {name: v for name, v in values.items() if v is not None and v is not False}
    if dtype != "int8":
        if given:
            flags = ", ".join(INT8_FLAGS[n].flag for n in given)
            raise UserInputError(f"{flags} only apply to --dtype int8 (this conversion is --dtype {dtype})",
                                 f"add --dtype int8, or leave out {flags}")
        return None
    if given.get("calib_synthetic") is not None and given["calib_synthetic"] < 1:
        raise UserInputError(f"--calib-synthetic {given['calib_synthetic']}: no batches to calibrate on",
                             "ask for at least 1 random batch (e.g. --calib-synthetic 16), or pass real data with --calib")
    if "observer" in given and given["observer"] not in OBSERVERS:  # QuantOptions takes any name; fail before exporting
        raise UserInputError(f"--observer {given['observer']}: no such observer", f"use one of: {', '.join(sorted(OBSERVERS))}")
    if "qconfig_out" in given and Path(given["qconfig_out"]).is_dir():
        raise UserInputError(f"--qconfig-out {given['qconfig_out']} is a folder", "pass a file path, e.g. qconfig.json")
    fields = {f.field: f.convert(given[n]) for n, f in INT8_FLAGS.items() if f.field and n in given}
    try:
        options = QuantOptions(**fields)
    except ValidationError as e:
        first = e.errors()[0]
        name = next(n for n, f in INT8_FLAGS.items() if f.field == first["loc"][0])
        flag = INT8_FLAGS[name]
        reason = first["msg"].removeprefix("Value error, ")
        raise UserInputError(f"{flag.flag} {given[name]}: {reason}", f"{flag.flag} takes {flag.accepts}") from None
    if options.qconfig_in is not None:  # a broken file should not cost an export and a calibration run first
        from .quant.convert import read_qconfig

        read_qconfig(options.qconfig_in)
    return options


# --------------------------------------------------------------------------- progress
class _StagesOnly(ProgressColumn):
    """Shows `column` for calibration stages (a known batch count) and nothing on the step spinner line."""

    def __init__(self, column: ProgressColumn):
        super().__init__(table_column=column.get_table_column())
        self.column = column

    def render(self, task):
        return self.column.render(task) if task.total is not None else Text("")


class _Description(ProgressColumn):
    """The step or stage text; on a narrow terminal it is cut short so that the rest stays on one line."""

    def render(self, task):
        return Text(task.description, no_wrap=True, overflow="ellipsis")


class _BatchCount(ProgressColumn):
    def render(self, task):
        return Text(f"{int(task.completed)}/{int(task.total)} batches", no_wrap=True)


class _Clock(ProgressColumn):
    """Time so far on the step line, time left on a calibration stage's line."""

    def __init__(self):
        super().__init__(table_column=Column(no_wrap=True))
        self.elapsed, self.remaining = TimeElapsedColumn(), TimeRemainingColumn()

    def render(self, task):
        return (self.elapsed if task.total is None else self.remaining).render(task)


class ConversionProgress:
    """One live display on stderr while converting: a spinner line with the current step, and a bar
    for each calibration stage. (rich allows one live display at a time, so a status spinner and
    separate progress bars cannot be combined.)"""

    def __init__(self, console: Console):
        self.display = Progress(SpinnerColumn(), _Description(), _StagesOnly(BarColumn(bar_width=20)),
                                _StagesOnly(_BatchCount(table_column=Column(no_wrap=True))), _Clock(),
                                console=console, transient=True)
        self.step = None

    def __enter__(self) -> "ConversionProgress":
        self.display.start()
        self.step = self.display.add_task("converting", total=None)
        return self

    def __exit__(self, *exc) -> None:
        self.display.stop()

    def say(self, message: str) -> None:
        self.display.update(self.step, description=message)

    def stage(self, name: str, total_batches: int) -> Callable[[], None]:
        """optimize(progress_bar=...): a new bar per calibration stage; the returned tick advances it by a batch."""
        task = self.display.add_task(f"  {name}", total=total_batches)
        return lambda: self.display.advance(task)


def _loud_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning for a conversion: a warning from ipexconvert (e.g. synthetic calibration) must stand out."""
    err.print(f"[bold yellow]WARNING:[/] [yellow]{escape(str(message))}[/]", highlight=False)


# --------------------------------------------------------------------------- int8 summary
def _print_quant_summary(plan: QuantPlan) -> None:
    """What the int8 conversion decided (a QuantPlan): layers, SmoothQuant, accuracy guard, calibration."""
    from .inspection import quant_overview

    o = quant_overview(plan)
    out.print(f"[bold]int8[/]: {o['quantized']} layer(s) quantized, {o['float']} kept in float "
              + _show(f"(observer {plan.observer}, activations {plan.activation_dtype}, weights {plan.weight_dtype} "
                      f"{plan.weight_scheme}, other ops {plan.float_dtype})"), highlight=False)
    for name, reason in o["fallbacks"].items():
        out.print(f"  float: {_show(name)}: {_show(reason or 'no reason recorded')}", highlight=False)
    out.print(f"[bold]SmoothQuant[/]: {_show(o['smoothquant'])}", highlight=False)
    out.print(f"[bold]accuracy guard[/]: {_show(o['guard'])}", highlight=False)
    if o["tuning"] is not None:
        out.print(f"[bold]tuning[/]: {_show(o['tuning'])}", highlight=False)
    out.print(f"[bold]calibration[/]: {_show(o['calibration'])}", highlight=False)
    if plan.calibration_synthetic:
        out.print("[bold yellow]WARNING: calibrated on RANDOM synthetic inputs; accuracy on real data is unknown "
                  "(pass --calib or --calib-text with real samples)[/]", highlight=False)


# --------------------------------------------------------------------------- optimize
@app.command()
@handle_errors
def optimize(
    source: str = typer.Argument(..., help="model.pt2, a Hugging Face folder, a checkpoint (.safetensors/.pt), or example:NAME"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="fp32 (default), bf16, int8 (needs --calib, --calib-text "
                                        "or --calib-synthetic, unless --weight-only) or int4 (4-bit weights, weight-only)"),
    target: Optional[str] = typer.Option(None, "--target", help="cpu (default; portable: any x86-64 CPU, kernels chosen at "
                                         "load) or cpu:LEVEL (only CPUs with that ISA level or above, e.g. cpu:avx512_bf16)"),
    config: Optional[Path] = typer.Option(None, "--config", help="a .json or .toml file of conversion settings "
                                          "(docs/configuration.md); flags given here override it"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="artifact path (default: NAME.DTYPE.ipxc)"),
    input: List[str] = typer.Option([], "--input", help="NAME:SHAPE:DTYPE, e.g. x:batch,3,224,224:float32 (repeatable)"),
    example_inputs: Optional[Path] = typer.Option(None, "--example-inputs", help="safetensors file with one tensor per input"),
    model_factory: Optional[str] = typer.Option(None, "--model-factory", help="package.module:function building the model"),
    model_kwargs: Optional[str] = typer.Option(None, "--model-kwargs", help="JSON keyword arguments for the factory"),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="allow sources that run code from the file when loaded: "
                                      "a pickled nn.Module checkpoint, or a .pt2 archive (torch.export.load unpickles and "
                                      "evaluates code in it); only for files from someone you trust"),
    passes: Optional[str] = typer.Option(None, "--passes", help="comma-separated pass list replacing the dtype's pipeline"),
    skip_pass: List[str] = typer.Option([], "--skip-pass", help="pass to leave out (repeatable)"),
    eos_token_id: List[int] = typer.Option([], "--eos-token-id", help="decoders: generation stops at this token id "
                                           "(repeatable; default: a Hugging Face folder's config)"),
    bos_token_id: Optional[int] = typer.Option(None, "--bos-token-id", help="decoders: the beginning-of-sequence token id"),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="decoders: a Hugging Face tokenizer.json to store "
                                             "in the artifact (text prompts; default: the folder's tokenizer.json)"),
    kv_cache: Optional[str] = typer.Option(None, "--kv-cache", help="decoders: bf16 stores the KV cache in bf16 beside "
                                           "float32 activations (half its memory and of the bytes attention reads a "
                                           "token), int8 as int8 rows with a scale per position and head (a quarter "
                                           "of float32's); default: the dtype the model computes in"),
    max_rel_error: Optional[float] = typer.Option(None, "--max-rel-error", help="accuracy budget: max |artifact-eager| / max |eager|"),
    min_cosine: Optional[float] = typer.Option(None, "--min-cosine", help="accuracy budget: min cosine similarity to eager "
                                               "(weight-only decoders: mean cosine of the teacher-forced logits)"),
    min_top1_agreement: Optional[float] = typer.Option(None, "--min-top1-agreement", help="weight-only decoders: share of "
                                                       "teacher-forced positions whose top-1 token is eager's"),
    max_perplexity_ratio: Optional[float] = typer.Option(None, "--max-perplexity-ratio", help="weight-only decoders: "
                                                         "perplexity on the built-in text / eager's"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="time eager vs artifact on the example inputs"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
    # --dtype int8 only (INT8_FLAGS lists them)
    calib: Optional[Path] = typer.Option(None, "--calib", rich_help_panel=INT8_PANEL,
                                         help="calibration batches: a .safetensors file or a folder of them"),
    calib_text: Optional[Path] = typer.Option(None, "--calib-text", rich_help_panel=INT8_PANEL,
                                              help="text file, one sentence a line (models with a tokenizer)"),
    calib_synthetic: Optional[int] = typer.Option(None, "--calib-synthetic", metavar="N", rich_help_panel=INT8_PANEL,
                                                  help="calibrate on N random batches (not recommended)"),
    observer: Optional[str] = typer.Option(None, "--observer", rich_help_panel=INT8_PANEL,
                                           help="minmax, percentile or histogram (default per model family)"),
    smoothquant: Optional[str] = typer.Option(None, "--smoothquant", metavar="auto|off|ALPHA", rich_help_panel=INT8_PANEL,
                                              help="SmoothQuant for transformer linears (default auto)"),
    max_error: Optional[float] = typer.Option(None, "--max-error", rich_help_panel=INT8_PANEL,
                                              help="accuracy guard budget (default per metric)"),
    guard_metric: Optional[str] = typer.Option(None, "--guard-metric", rich_help_panel=INT8_PANEL,
                                               help="auto, cosine, relative or top1"),
    no_guard: bool = typer.Option(False, "--no-guard", rich_help_panel=INT8_PANEL,
                                  help="keep every layer int8, without the accuracy guard"),
    qconfig_out: Optional[Path] = typer.Option(None, "--qconfig-out", rich_help_panel=INT8_PANEL,
                                               help="write the quantization plan as editable JSON"),
    qconfig_in: Optional[Path] = typer.Option(None, "--qconfig-in", rich_help_panel=INT8_PANEL,
                                              help="use a plan written by --qconfig-out"),
    float_dtype: Optional[str] = typer.Option(None, "--float-dtype", rich_help_panel=INT8_PANEL,
                                              help="auto, float32 or bfloat16 for ops without int8 kernels"),
    tune: bool = typer.Option(False, "--tune", rich_help_panel=INT8_PANEL,
                              help="search observers, SmoothQuant and fallback until --eval-fn is within --tolerable-loss of fp32"),
    eval_fn: Optional[str] = typer.Option(None, "--eval-fn", rich_help_panel=INT8_PANEL,
                                          help="package.module:function(model) -> score (higher is better), for --tune"),
    tolerable_loss: Optional[float] = typer.Option(None, "--tolerable-loss", rich_help_panel=INT8_PANEL,
                                                   help="relative score loss allowed by --tune (default 0.01)"),
    weight_only: bool = typer.Option(False, "--weight-only", rich_help_panel=WOQ_PANEL,
                                     help="with --dtype int8: int8 weights per output channel (activations: --activations), no "
                                          "calibration data (int4 is always weight-only)"),
    group_size: Optional[str] = typer.Option(None, "--group-size", metavar="32|64|128|channel", rich_help_panel=WOQ_PANEL,
                                             help="input features per weight scale (default 128 for int4, channel for int8)"),
    asymmetric: bool = typer.Option(False, "--asymmetric", rich_help_panel=WOQ_PANEL,
                                    help="int4: a zero point per group as well as a scale"),
    quantize_lm_head: bool = typer.Option(False, "--quantize-lm-head", rich_help_panel=WOQ_PANEL,
                                          help="quantize the LM head too (kept float by default)"),
    activations: Optional[str] = typer.Option(None, "--activations", metavar="auto|float|bf16|int8", rich_help_panel=WOQ_PANEL,
                                              help="int8 rounds each activation row to int8 so the layers multiply "
                                                   "integers; bf16 computes everything but the quantized weights in "
                                                   "bf16 (for GPUs); auto (default) is int8 for decoders while their "
                                                   "teacher-forced budget holds, float elsewhere"),
    int8_activations: bool = typer.Option(False, "--int8-activations", rich_help_panel=WOQ_PANEL,
                                          help="the same as --activations int8"),
    no_weight_only_guard: bool = typer.Option(False, "--no-weight-only-guard", rich_help_panel=WOQ_PANEL,
                                              help="decoders: keep every layer quantized, without moving the worst "
                                                   "back to float when the teacher-forced budget fails"),
    woq_algorithm: Optional[str] = typer.Option(None, "--woq-algorithm", metavar="rtn|gptq|awq", rich_help_panel=WOQ_PANEL,
                                                help="how the weight codes are chosen: rtn rounds to nearest (default, no "
                                                     "data); gptq and awq calibrate on --calib-text (decoders; Intel "
                                                     "Neural Compressor: pip install neural-compressor-pt)"),
):
    """Convert a model into an .ipxc artifact and check it against eager PyTorch."""
    from .api import load_artifact
    from .api import optimize as run_optimize
    from .config import ConversionConfig
    from .frontend.torch.inputs import load_inputs_file, parse_input_arg
    from .frontend.torch.sources import parse_model_kwargs

    if output is not None and output.is_dir():
        raise UserInputError(f"-o {output} is a folder, not an artifact path", f"pass a file path, e.g. -o {output / 'model.ipxc'}")
    file_config = ConversionConfig.from_file(config) if config is not None else None
    dtype = dtype or (file_config.dtype if file_config is not None else "fp32")
    algorithm = woq_algorithm or (file_config.weight_only.algorithm if file_config is not None else "rtn")
    woq_dtype = dtype == "int4" or weight_only or (
        dtype == "int8" and file_config is not None and file_config.int8_scheme == "weight-only")
    calibrated_woq = woq_dtype and algorithm != "rtn"
    if woq_dtype and not calibrated_woq and calib_text is not None:
        raise UserInputError("--calib-text calibrates static int8 and --woq-algorithm gptq / awq, and this weight-only "
                             "conversion rounds to nearest (rtn), which reads no data",
                             "add --woq-algorithm gptq (or awq), or leave out --calib-text")
    quant = _quant_options(dtype, {  # --calib-text is GPTQ's / AWQ's calibration text then, not an int8 flag
        "calib": calib, "calib_text": None if calibrated_woq else calib_text, "calib_synthetic": calib_synthetic,
        "observer": observer,
        "smoothquant": smoothquant, "max_error": max_error, "guard_metric": guard_metric, "no_guard": no_guard,
        "qconfig_out": qconfig_out, "qconfig_in": qconfig_in, "float_dtype": float_dtype, "tune": tune,
        "eval_fn": eval_fn, "tolerable_loss": tolerable_loss})
    tune_settings = _tune_settings({"tune": tune, "eval_fn": eval_fn, "tolerable_loss": tolerable_loss}) if quant else None
    input_args = [parse_input_arg(text).to_text() for text in input]  # each checked now, before any slow work
    tensors = load_inputs_file(example_inputs) if example_inputs else None
    kwargs = parse_model_kwargs(model_kwargs)
    if qconfig_out is not None:
        written.expect(qconfig_out)
    with ConversionProgress(err) as progress, warnings.catch_warnings():
        warnings.showwarning = _loud_warning
        result = run_optimize(
            source, tensors, file_config, dtype=dtype, target=target, output=output, inputs=input_args or None,
            passes=[p.strip() for p in passes.split(",") if p.strip()] if passes else None, skip_passes=skip_pass or None,
            eos_token_ids=eos_token_id or None, bos_token_id=bos_token_id, tokenizer=tokenizer, kv_cache=kv_cache,
            max_rel_error=max_rel_error, min_cosine=min_cosine, min_top1_agreement=min_top1_agreement,
            max_perplexity_ratio=max_perplexity_ratio, model_factory=model_factory, model_kwargs=kwargs or None,
            trust_pickle=trust_pickle or None, progress=progress.say, calib_files=calib, calib_text=calib_text,
            calib_synthetic=calib_synthetic, quant=quant, qconfig_out=qconfig_out, progress_bar=progress.stage,
            tune=tune_settings, on_output=written.expect,
            int8_scheme="weight-only" if weight_only else None, group_size=group_size,
            woq={**({"algorithm": woq_algorithm} if woq_algorithm else {}),
                 **({"symmetric": False} if asymmetric else {}),
                 **({"quantize_lm_head": True} if quantize_lm_head else {}),
                 **({"activations": "int8"} if int8_activations else {"activations": activations} if activations else {}),
                 **({"guard": False} if no_weight_only_guard else {})} or None)
        timings = None
        if timing:
            progress.say("timing eager vs artifact")
            from .bench import time_pair

            model = load_artifact(result.path)
            timings = time_pair(result.source.eager, model, result.example_inputs, rounds=10)
    manifest = result.manifest
    size = result.path.stat().st_size
    if as_json:
        out.print_json(json.dumps({"path": str(result.path), "size_bytes": size, "manifest": manifest.model_dump(mode="json"),
                                   "timing_ms": timings}))
        return
    table = Table(title=f"passes ({len(manifest.passes)})", show_edge=False)
    table.add_column("pass")
    table.add_column("changes")
    for record in manifest.passes:
        changed = ", ".join(f"{k}={v}" for k, v in record.changes.items() if v) or "-"
        table.add_row(record.name, changed)
    out.print(table)
    ops = ", ".join(f"{k} {v}" for k, v in manifest.op_histogram.items())
    out.print(f"[bold]ops[/] ({sum(manifest.op_histogram.values())}): {ops}", highlight=False)
    judged = (f"judged by {manifest.accuracy.judged_by}; budget rel {manifest.accuracy.budget_rel_error:g}, cosine "
              f"{manifest.accuracy.budget_min_cosine:g}") if manifest.accuracy.decoder is None else \
        f"one call on the example inputs; {manifest.accuracy.judged_by} below decide"
    for acc in manifest.accuracy.outputs:
        out.print(f"[bold]accuracy[/] {acc.name}: {_accuracy_line(acc.model_dump())} ({judged})", highlight=False)
    _print_decoder_accuracy(manifest.model_dump(mode="json"))
    if manifest.quantization is not None:
        from .quant.plan import QuantPlan

        _print_quant_summary(QuantPlan.model_validate(manifest.quantization))
    if timings:
        out.print(f"[bold]latency[/] (median of {timings['rounds']}): eager {timings['eager_ms']:.2f} ms, "
                  f"artifact {timings['artifact_ms']:.2f} ms (x{timings['eager_ms'] / timings['artifact_ms']:.2f})", highlight=False)
    out.print(f"[bold green]wrote[/] {escape(str(result.path))} ({_human_bytes(size)}, {manifest.dtype})", highlight=False)
    if qconfig_out is not None:
        out.print(f"[bold green]wrote[/] {escape(str(qconfig_out))} (quantization plan; edit it and pass it back with --qconfig-in)",
                  highlight=False)


def _target_text(manifest: dict) -> str:
    """The manifest's target as "cpu" / "cpu:avx2" (hardened: inspect shows damaged manifests too)."""
    target = manifest.get("target")
    if not isinstance(target, dict):
        return str(manifest.get("device", "cpu"))
    level = target.get("level", "portable")
    return f"{target.get('device')}" + ("" if level == "portable" else f":{level}")


# --------------------------------------------------------------------------- inspect
@app.command()
@handle_errors
def inspect(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
):
    """Show what an artifact holds: manifest, passes, ops, fallbacks, weights, signature."""
    from .inspection import inspect_artifact

    # Everything below comes from the artifact, an untrusted file: inspect_artifact has validated its types
    # (or refused it), and every string goes through _show (JSON: ASCII escapes) before it is printed.
    report = inspect_artifact(artifact)
    summary = report.summary
    if as_json:
        out.print_json(json.dumps(_json_safe(summary)), ensure_ascii=True)
        return
    m = summary["manifest"]
    out.print(f"[bold]{_show(artifact)}[/] — format v{m['format_version']}, {m['dtype']}, target {_show(_target_text(m))}, "
              f"{_human_bytes(summary['file_bytes'])}", highlight=False)
    src = m["source"]
    out.print(_show(f"source: {src['kind']} {src['location']}; made by {m['producer']} with torch {m['torch_version']} "
                    f"at {m['created_at']}"), highlight=False)
    out.print(f"signature: {_show(summary['signature'])}", highlight=False)
    if m["dims"]:
        out.print("dynamic dims: " + _show(", ".join(f"{k} {v['min']}..{v['max']}" for k, v in m["dims"].items())),
                  highlight=False)
    passes = Table(title="passes", show_edge=False)
    passes.add_column("pass")
    passes.add_column("changes")
    for p in m["passes"]:
        passes.add_row(_show(p["name"]), _show(", ".join(f"{k}={v}" for k, v in p["changes"].items() if v) or "-"))
    out.print(passes)
    ops = Table(title="ops", show_edge=False)
    ops.add_column("op")
    ops.add_column("count", justify="right")
    for name, count in m["op_histogram"].items():
        ops.add_row(_show(name), str(count))
    out.print(ops)
    out.print("fallback ATen ops: " + (_show(", ".join(m["fallback_ops"])) or "none"), highlight=False)
    out.print("weights: " + _show(", ".join(f"{k} {_human_bytes(v)}" for k, v in summary["weight_bytes_by_dtype"].items())),
              highlight=False)
    if summary.get("weight_only"):
        out.print("weight-only layers: " + _show(", ".join(f"{k} x{v}" for k, v in summary["weight_only"].items())),
                  highlight=False)
    if summary.get("decoder"):
        d = summary["decoder"]
        out.print(f"decoder: KV cache of {d['cache_tensors']} tensors ({_show(d.get('cache_dtype') or '?')}), "
                  f"{_human_bytes(d['cache_bytes_per_token'])} per "
                  f"position, up to {d['max_positions']} positions; tokenizer "
                  f"{'stored' if d['tokenizer'] else 'not stored (token ids only)'}; eos ids "
                  f"{_show(str(d['eos_token_ids']))}", highlight=False)
        refusal = d.get("static_cache_refusal")
        out.print("on a GPU: " + ("static caches, one captured decode step" if refusal is None else
                                  f"growing caches ({_show(refusal)})"), highlight=False)
    if m["accuracy"]:
        for acc in m["accuracy"]["outputs"]:
            out.print(f"accuracy at conversion, {_show(acc['name'])}: {_accuracy_line(acc)}", highlight=False)
    _print_decoder_accuracy(m)
    if report.plan is not None and m["quantization"]:  # an empty record ({}) has nothing to show
        _print_quant_table(report.plan, report.layers)


def _print_quant_table(plan: QuantPlan, layers: list[LayerPlan]) -> None:
    """inspect for an int8 artifact (its QuantPlan and LayerPlans in graph order): the plan's settings, then one
    row per linear/conv layer."""
    from .inspection import QUANT_COLUMNS

    _print_quant_summary(plan)
    # Ten columns: no vertical rules, and cells wrap (at spaces) rather than truncate, since a cut-off
    # scale or layer name would mislead.
    table = Table(title="quantization by layer (SmoothQuant: alpha -> where 1/s is folded)", box=box.SIMPLE_HEAD,
                  show_edge=False, collapse_padding=True, pad_edge=False)
    for header in QUANT_COLUMNS:
        table.add_column(header, justify="right" if header in ("in scale", "zero pt", "sensitivity") else "left",
                         overflow="fold")
    notes = []
    for layer in layers:
        cells = [QUANT_COLUMNS[h](layer) for h in QUANT_COLUMNS]
        if not layer.quantized:  # reasons are long: a numbered note under the table keeps the rows readable
            notes.append(f"({len(notes) + 1}) {layer.node}: {layer.fallback_reason or 'no reason recorded'}")
            cells[list(QUANT_COLUMNS).index("precision")] += f" ({len(notes)})"
        table.add_row(*map(_show, cells))
    out.print(table)
    for note in notes:
        out.print(f"  {_show(note)}", highlight=False)


# --------------------------------------------------------------------------- export
@app.command()
@handle_errors
def export(
    artifact: Path = typer.Argument(..., help="an .ipxc file (fp32)"),
    output: Path = typer.Option(..., "-o", "--output", help="the .onnx file to write"),
    check: bool = typer.Option(True, "--check/--no-check", help="run the ONNX file under ONNX Runtime (when installed) "
                               "on the artifact's example inputs and compare with the artifact"),
):
    """Write an artifact as an ONNX model (opset 17; fp32 artifacts for now)."""
    from .export.onnx import export_onnx

    written.expect(output)
    path, report = export_onnx(artifact, output, check=check)
    for line in report:
        out.print(_show(line))
    out.print(f"wrote {_show(str(path))} ({path.stat().st_size / 2**20:.1f} MiB, ONNX opset 17)")


# --------------------------------------------------------------------------- run
_DEVICE_HELP = ("where to run it: cpu or cuda (default: the device it was made for, the CPU); the same artifact "
                "runs on both")


@app.command()
@handle_errors
def run(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="safetensors file with one tensor per input (default: the stored example inputs)"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="where to write outputs (safetensors)"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="intra-op threads (default: all cores)"),
    device: Optional[str] = typer.Option(None, "--device", help=_DEVICE_HELP),
    check_finite: bool = typer.Option(False, "--check-finite", help="exit 1 if an output holds NaN or Inf "
                                      "(outputs and inputs holding them are reported either way)"),
):
    """Run an artifact on inputs from a safetensors file and write the outputs.

    Each output's line says how many NaN/Inf values it holds. Float inputs holding NaN/Inf run a
    NaN-safe plan (NaN propagates as in eager PyTorch); an int8 artifact refuses them (exit 2)."""
    from .api import load_artifact
    from .artifact import read_example_inputs
    from .check import nonfinite_counts
    from .frontend.torch.inputs import load_inputs_file

    if output is not None:
        check_writable(output, "-o")
        written.expect(output)
    model = load_artifact(artifact, threads=threads, device=device)
    tensors = load_inputs_file(inputs, model.signature.input_names) if inputs else read_example_inputs(artifact)
    results = {name: t.cpu() for name, t in model.run_dict(tensors).items()}
    nonfinite_outputs = []
    for name, t in results.items():
        line = f"{name}: {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
        nan, inf = nonfinite_counts(t)
        if nan or inf:
            nonfinite_outputs.append(name)
            line += f" (holds {nan} NaN, {inf} Inf of {t.numel()} values)"
        out.print(line, highlight=False, markup=False)
    _note_nonfinite_inputs(model, tensors)
    if output is not None:
        _save_outputs(results, output)
        out.print(f"wrote {escape(str(output))}", highlight=False)
    if check_finite and nonfinite_outputs:
        err.print(f"[bold red]non-finite:[/] output(s) {escape(', '.join(nonfinite_outputs))} hold NaN or Inf", highlight=False)
        raise typer.Exit(1)


def _note_nonfinite_inputs(model, tensors: dict) -> None:
    """Say which inputs hold NaN/Inf and which of this artifact's kernels may turn NaN into numbers."""
    from .check import nonfinite_counts

    flagged = {n: nonfinite_counts(t) for n, t in tensors.items()}
    flagged = {n: c for n, c in flagged.items() if c[0] or c[1]}
    if not flagged:
        return
    for name, (nan, inf) in flagged.items():
        err.print(f"[yellow]note:[/] input {escape(name)} holds {nan} NaN, {inf} Inf", highlight=False)
    if model.manifest.dtype != "int8":
        err.print("[yellow]note:[/] these inputs run a NaN-safe plan (no oneDNN max pooling or fused relu, which turn NaN "
                  "into numbers), so NaN propagates as in eager PyTorch", highlight=False)


def _save_outputs(results: dict, output: Path) -> None:
    """Outputs as safetensors, written in a scratch folder next to `output` and renamed over it."""
    from safetensors.torch import save_file

    with scratch_folder(output, "-o") as folder, write_errors(output, "-o"):
        save_file({k: v.contiguous() for k, v in results.items()}, str(folder / "outputs.safetensors"))
        os.replace(folder / "outputs.safetensors", output)


# --------------------------------------------------------------------------- generate
@app.command()
@handle_errors
def generate(
    artifact: Path = typer.Argument(..., help="an .ipxc file of a causal LM (converted with its KV cache)"),
    prompt: Optional[list[str]] = typer.Option(
        None, "--prompt", "-p", help="text to continue (needs the tokenizer the artifact stores when converted from a "
        "folder with tokenizer.json); repeat it for a batch"),
    ids: Optional[list[str]] = typer.Option(
        None, "--ids", help="the prompt as comma-separated token ids, e.g. 1,45,300; repeat it for a batch"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", "-n", min=1, help="how many tokens to add at most"),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="0: greedy; above 0: sample"),
    top_k: int = typer.Option(0, "--top-k", min=0, help="sample among the k most likely tokens (0: all)"),
    top_p: float = typer.Option(1.0, "--top-p", help="sample among the most likely tokens holding this probability"),
    seed: Optional[int] = typer.Option(None, "--seed", help="seed of the sampling (same seed, same text)"),
    stream: bool = typer.Option(False, "--stream", help="print tokens as they come"),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="do not stop at the end-of-sequence token"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="intra-op threads (default: all cores)"),
    device: Optional[str] = typer.Option(None, "--device", help=_DEVICE_HELP),
):
    """Continue a prompt with a decoder artifact: greedy or sampled, printing the text (or the token ids
    when the artifact stores no tokenizer) and prefill / per-token timings. Several --prompt (or --ids) make a
    batch, one line of output a prompt (prompts of different lengths run row by row: docs/decoders.md)."""
    from .api import load_artifact

    if bool(prompt) == bool(ids):
        raise UserInputError("give the prompt as --prompt TEXT or as --ids 1,2,3 (one of them)",
                             'e.g. ipexconvert generate model.ipxc --prompt "Once upon a time"')
    given = list(prompt) if prompt else [_parse_ids(row) for row in ids]
    if stream and len(given) > 1:
        raise UserInputError(f"--stream prints one prompt's tokens as they come; {len(given)} prompts were given",
                             "leave out --stream for a batch, or give one prompt")
    model = load_artifact(artifact, threads=threads, device=device)
    decoder = model.decoder
    settings = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                    stop_at_eos=not ignore_eos)
    if stream:
        shown, new = "", []
        for step in model.stream(given, **settings):
            new.append(int(step[0]))
            if decoder.tokenizer is None:
                out.print(str(new[-1]), end=" ", highlight=False)
            else:
                text = decoder.decode(new)
                out.print(text[len(shown):] if text.startswith(shown) else "\n" + text, end="", highlight=False, markup=False)
                shown = text
        out.print()
        return
    result = model.generate(given, **settings)
    for row, new_ids in enumerate(result.new_ids):
        text = result.text[row] if result.text is not None else " ".join(map(str, new_ids))
        out.print(text, highlight=False, markup=False)
    prompt_tokens = sum(len(row) for row in result.prompt_ids)
    counts = " + ".join(str(len(row)) for row in result.prompt_ids)
    line = (f"prompt{'s' if len(result.prompt_ids) > 1 else ''} {counts} tokens, prefill "
            f"{1000 * result.prefill_seconds:.1f} ms ({prompt_tokens / max(result.prefill_seconds, 1e-9):.0f} tokens/s); "
            f"{max(len(row) for row in result.new_ids)} new tokens")
    if result.decode_ms_per_token is not None:
        line += f", decode {result.decode_ms_per_token:.2f} ms/token (median)"
    err.print(f"{line}; stopped by {result.stopped_by}", highlight=False)


def _parse_ids(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise UserInputError(f"--ids {text!r} is not a comma-separated list of integers", "write it like --ids 1,45,300") from None
    if not values:
        raise UserInputError("--ids is empty", "write it like --ids 1,45,300")
    return values


# --------------------------------------------------------------------------- bench
@app.command()
@handle_errors
def bench(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    against: Optional[str] = typer.Option(None, "--against", help="also time this eager model (same SOURCE forms as optimize)"),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="allow an --against source that runs code from the file "
                                      "(a pickled nn.Module, a .pt2 archive)"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="safetensors inputs (default: stored example inputs)"),
    dim: List[str] = typer.Option([], "--dim", help="NAME=SIZE for a dynamic dim, e.g. batch=16 (resizes the example inputs)"),
    warmup: int = typer.Option(3, "--warmup", min=0, help="untimed calls of each model before the rounds (the "
                                "artifact makes at least 10: its layers may choose their kernels in their first calls)"),
    rounds: int = typer.Option(20, "--rounds", min=1),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch intra-op threads (default: all cores)"),
    profile: bool = typer.Option(False, "--profile", help="print time per op kind"),
    device: Optional[str] = typer.Option(None, "--device", help=_DEVICE_HELP),
    avoid_kernel: List[str] = typer.Option([], "--avoid-kernel", help="a kernel factory or family not to use, e.g. "
                                           "onednn_direct (repeatable; `ipexconvert doctor --kernels` lists them)"),
    prompt_tokens: int = typer.Option(128, "--prompt-tokens", min=1, help="decoders: the prompt length generations start from"),
    new_tokens: int = typer.Option(32, "--new-tokens", min=1, help="decoders: tokens each timed generation adds"),
    as_json: bool = typer.Option(False, "--json"),
):
    """Time an artifact (and optionally the eager model): median/p90 latency, throughput, memory. A decoder
    also times generations: prefill tokens/s, decode ms/token and the share of read bandwidth it reaches."""
    from .bench import run_bench

    report = run_bench(artifact, against=against, inputs_path=inputs, dims=dim, warmup=warmup, rounds=rounds,
                       threads=threads, profile=profile, console=err, trust_pickle=trust_pickle,
                       avoid_kernels=tuple(avoid_kernel), device=device, prompt_tokens=prompt_tokens,
                       new_tokens=new_tokens)
    if as_json:
        out.print_json(json.dumps(report))
        return
    where = (f"{report['threads']} threads, ISA {report['isa']}" if report["device"] == "cpu"
             else f"{report['device']} {report['isa']}")
    table = Table(title=f"bench {artifact.name} (batch {report['batch']}, {where})",
                  show_edge=False)
    for col in ("model", "median ms", "p90 ms", "throughput/s"):
        table.add_column(col, justify="right" if col != "model" else "left")
    for row in report["results"]:
        table.add_row(row["name"], f"{row['median_ms']:.2f}", f"{row['p90_ms']:.2f}", f"{row['throughput']:.1f}")
    out.print(table)
    out.print(f"load {report['load_ms']:.1f} ms; peak RSS {_human_bytes(report['peak_rss_bytes'])}; "
              f"malloc tuning {report['malloc_tuning']}", highlight=False)
    out.print(f"computes in: {report['compute']}", highlight=False)
    gen = report.get("generation")
    if gen is not None:
        line = (f"generation (median of {gen['rounds']}): prefill {gen['prompt_tokens']} tokens {gen['prefill_ms']:.1f} ms "
                f"({gen['prefill_tokens_per_s']:.0f} tokens/s)")
        if gen["decode_ms_per_token"] is not None:
            line += (f"; decode {gen['decode_ms_per_token']:.2f} ms/token, reading {gen['weight_mb_per_token']:.0f} MB of "
                     f"weights a token: {gen['bandwidth_share']:.2f} of the {gen['read_bandwidth_gbs']:.1f} GB/s read bandwidth "
                     f"measured here (best pass); with the {gen['cache_mb_per_token']:.1f} MB of KV cache its "
                     f"attention reads, {gen['read_share']:.2f}")
        out.print(line, highlight=False)
    for shapes, how in report.get("graphs", {}).items():
        out.print(f"inputs {shapes}: {'one CUDA graph replay per call' if how == 'graph' else how}", highlight=False, markup=False)
    if report.get("profile"):
        prof = Table(title="time per op kind (one run)", show_edge=False)
        prof.add_column("kernel")
        prof.add_column("ms", justify="right")
        prof.add_column("share", justify="right")
        total = sum(report["profile"].values()) or 1.0
        for name, sec in sorted(report["profile"].items(), key=lambda kv: -kv[1]):
            prof.add_row(name, f"{sec * 1e3:.3f}", f"{100 * sec / total:.1f}%")
        out.print(prof)


# --------------------------------------------------------------------------- check
@app.command()
@handle_errors
def check(
    artifact: Path = typer.Argument(..., help="an .ipxc file"),
    reference: str = typer.Option(..., "--reference", help="golden outputs (.safetensors), a model SOURCE to run eagerly, or an .onnx file to "
                                   "run under ONNX Runtime (e.g. this artifact's `ipexconvert export`)"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="safetensors inputs (default: stored example inputs)"),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="max |artifact-ref| / max |ref| (default per dtype)"),
    atol: float = typer.Option(0.0, "--atol", help="absolute slack added to the tolerance"),
    min_cosine: Optional[float] = typer.Option(None, "--min-cosine", help="min cosine similarity (default per dtype)"),
    model_factory: Optional[str] = typer.Option(None, "--model-factory"),
    model_kwargs: Optional[str] = typer.Option(None, "--model-kwargs"),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="allow a --reference that runs code from the file "
                                      "(a pickled nn.Module, a .pt2 archive)"),
    check_finite: bool = typer.Option(True, "--check-finite/--no-check-finite",
                                      help="fail an output whose NaN/Inf values are not where the reference has them "
                                           "(NaN/Inf where the reference is finite, or a number where it is NaN/Inf); "
                                           "--no-check-finite only reports them. Errors are measured where both are finite"),
    junit: Optional[Path] = typer.Option(None, "--junit", help="write a JUnit XML report here"),
    device: Optional[str] = typer.Option(None, "--device", help=_DEVICE_HELP),
    as_json: bool = typer.Option(False, "--json"),
):
    """CI gate: compare an artifact's outputs with a reference. Exit 0 within tolerance, 1 on regression, 2 on usage error."""
    from .check import run_check, write_junit

    if junit is not None:
        check_writable(junit, "--junit")
        written.expect(junit)
    report = run_check(artifact, reference, inputs_path=inputs, rtol=rtol, atol=atol, min_cosine=min_cosine,
                       model_factory=model_factory, model_kwargs=model_kwargs, trust_pickle=trust_pickle,
                       check_finite=check_finite, device=device)
    if junit is not None:
        with write_errors(junit, "--junit"):
            write_junit(report, junit)
    if as_json:
        out.print_json(json.dumps(_json_safe(report)))
    else:
        for o in report["outputs"]:
            status = "[green]ok[/]" if o["passed"] else "[bold red]REGRESSION[/]"
            line = (f"{status} {escape(o['name'])}: max abs err {o['max_abs_error']:.3e}, rel {o['max_rel_error']:.3e} "
                    f"(tol {o['tolerance']:.3e}), cosine {o['cosine']:.6f} (min {report['min_cosine']:g})")
            counts = o.get("nonfinite") or {}
            if counts.get("artifact") or counts.get("reference"):
                line += f"; NaN/Inf: artifact {counts['artifact']}, reference {counts['reference']}"
            if not o["passed"] and o.get("message"):
                line += f" ({escape(o['message'])})"
            out.print(line, highlight=False)
        out.print("[bold green]PASS[/]" if report["passed"] else "[bold red]FAIL[/]")
    raise typer.Exit(0 if report["passed"] else 1)


# --------------------------------------------------------------------------- doctor
@app.command()
@handle_errors
def doctor(as_json: bool = typer.Option(False, "--json"),
           kernels: bool = typer.Option(False, "--kernels", help="list every op's registered kernels, in preference "
                                        "order, and which of them this machine would run"),
           markdown: bool = typer.Option(False, "--markdown", help="with --kernels: the table as Markdown, without this "
                                         "machine's answers (docs/kernels.md is made this way)")):
    """Versions, CPU features, and the ISA level the runtime will use."""
    from .doctor import environment_report, kernel_table, kernels_markdown

    if kernels and markdown:
        print(kernels_markdown(), end="")
        return
    if kernels:
        rows = kernel_table()
        if as_json:
            out.print_json(json.dumps(rows))
            return
        table = Table(title=f"CPU kernels at {rows[0]['isa'] if rows else '?'} (the first that can run here and accepts "
                            "a node runs it; the op's reference when all decline)", show_edge=False)
        for column in ("op", "factories, in preference order", "can run here", "cannot, and why"):
            table.add_column(column)
        for row in rows:
            table.add_row(row["op"], " > ".join(row["factories"]) + " > reference", row["runs_here"],
                          "; ".join(f"{n}: {why}" for n, why in row["not_here"].items()) or "-")
        out.print(table)
        return
    report = environment_report()
    if as_json:
        out.print_json(json.dumps(report))
        return
    for key, value in report.items():
        if isinstance(value, dict):
            out.print(f"[bold]{key}[/]: " + ", ".join(f"{k} {v}" for k, v in value.items()), highlight=False)
        elif isinstance(value, list):
            out.print(f"[bold]{key}[/]: {' '.join(map(str, value)) or '-'}", highlight=False)
        else:
            out.print(f"[bold]{key}[/]: {value}", highlight=False)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
