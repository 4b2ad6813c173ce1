"""Run one artifact file in a forked child with a time and memory cap, and classify what happened.

The child loads the artifact, calls it on valid inputs, and runs `inspect` (JSON and text), each step a
"stage" that reports on its own, so a project error in loading does not hide a crash in inspect. It talks
to the parent over a pipe, one JSON line per message: {"stage": name} before a stage, {"result": {...}}
after it, {"code_exec": ...} the moment the audit hook sees code being run.

Outcomes, from harmless to worst: ok, skipped, project_error (an IpexConvertError subclass: the intended
way to refuse), oom (MemoryError or an allocation refused by the memory cap), nonproject (any other
exception escaping), hang (the time cap), crash (killed by a signal or died without reporting), code_exec
(a marker file created, or the audit hook saw os.system/subprocess/exec of a payload/pickle).
"""
from __future__ import annotations

import faulthandler
import json
import os
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

import ipexconvert
from ipexconvert.errors import IpexConvertError

from mutators import MARKER, SENTINEL

OUTCOMES = ("ok", "skipped", "project_error", "oom", "nonproject", "hang", "crash", "code_exec")
FAILING = ("oom", "nonproject", "hang", "crash", "code_exec")
SEVERITY = {name: i for i, name in enumerate(OUTCOMES)}

PACKAGE_DIR = str(Path(ipexconvert.__file__).resolve().parent)
_PACKAGE_ROOT = str(Path(PACKAGE_DIR).parent)
MAX_DIM = 4096  # largest dynamic-dim size the signature-built inputs use
_ALLOC_FAILURES = ("can't allocate memory", "bad_alloc", "Cannot allocate memory", "not enough memory",
                   "out of memory", "std::length_error")
_EXEC_EVENTS = ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "pickle.find_class",
                "os.fork", "os.forkpty", "pty.spawn", "webbrowser.open")


@dataclass
class Limits:
    timeout: float = 10.0  # seconds for the whole case (all stages)
    mem_bytes: int = 4 << 30  # address space the child may add to what it inherited
    max_input_elements: int = 1 << 22  # signature-built inputs larger than this are not made


class SkipStage(Exception):
    """The stage has nothing to do (no model loaded, inputs the fuzzer will not build)."""


class BadOutput(Exception):
    """The model returned something that is not a tensor (reported as a non-project exception)."""


# ---- the child ------------------------------------------------------------------------------------------------------


@dataclass
class Context:
    path: Path
    inputs: dict[str, torch.Tensor]
    input_seed: int
    limits: Limits
    model: Any = None


def _touch(outputs: Any) -> None:
    """Read every element of every output: a tensor over memory it does not own faults here."""
    values = outputs.values() if isinstance(outputs, dict) else outputs
    for name, out in zip(outputs if isinstance(outputs, dict) else range(len(values)), values):
        if not isinstance(out, torch.Tensor):
            raise BadOutput(f"output {name} is a {type(out).__name__}, not a tensor")
        out.detach().to(torch.float64).sum().item()


def stage_load(ctx: Context) -> None:
    ctx.model = ipexconvert.load_artifact(ctx.path)


def stage_run_seed_inputs(ctx: Context) -> None:
    """The seed's own example inputs: valid for the unmutated model."""
    if ctx.model is None:
        raise SkipStage("not loaded")
    _touch(ctx.model.run_dict(dict(ctx.inputs)))


def stage_run_stored_inputs(ctx: Context) -> None:
    """What `ipexconvert run/bench/check` do without --input: the example inputs stored in the file."""
    from ipexconvert.artifact import read_example_inputs
    stored = read_example_inputs(ctx.path)
    if ctx.model is None or not stored:
        raise SkipStage("not loaded" if ctx.model is None else "no stored inputs")
    _touch(ctx.model.run_dict(stored))


def _signature_inputs(ctx: Context) -> dict[str, torch.Tensor]:
    """Inputs made from the (possibly mutated) signature: each dynamic dim at its min, max or in between."""
    from ipexconvert.ir import dtypes
    from ipexconvert.ir.dims import resolve
    gen = torch.Generator().manual_seed(ctx.input_seed)
    sig = ctx.model.signature
    try:
        bound = {}
        for name, rng in sig.dims.items():
            # sizes an honest caller might use: a range declared up to 2**62 is not an invitation to send that much
            choices = sorted({v for v in (rng.min, rng.max, min(rng.max, rng.min + 1), (rng.min + rng.max) // 2)
                              if v <= MAX_DIM} or {rng.min})
            bound[name] = choices[ctx.input_seed % len(choices)]
        tensors, total = {}, 0
        for io in sig.inputs:
            shape = [d if isinstance(d, int) else resolve(d, bound) for d in io.spec.shape]
            numel = 1
            for d in shape:
                numel *= d
            total += numel
            if total > ctx.limits.max_input_elements or any(d < 0 for d in shape):
                raise SkipStage(f"inputs of {total} elements")
            dtype = dtypes.to_torch(io.spec.dtype)
            if dtype.is_floating_point:
                tensors[io.name] = torch.randn(shape, generator=gen).to(dtype)
            elif dtype == torch.bool:
                tensors[io.name] = torch.randint(0, 2, shape, generator=gen).bool()
            else:
                tensors[io.name] = torch.randint(0, 2, shape, generator=gen).to(dtype)
            if io.spec.memory_format == "channels_last" and len(shape) == 4:
                tensors[io.name] = tensors[io.name].contiguous(memory_format=torch.channels_last)
    except SkipStage:
        raise
    except Exception as e:  # the fuzzer cannot build inputs for this signature: not the project's fault
        raise SkipStage(f"no inputs for this signature ({type(e).__name__}: {e})") from None
    return tensors


def stage_run_signature_inputs(ctx: Context) -> None:
    if ctx.model is None:
        raise SkipStage("not loaded")
    _touch(ctx.model.run_dict(_signature_inputs(ctx)))


def stage_run_hostile_inputs(ctx: Context) -> None:
    """The seed's inputs with edge values (out-of-vocabulary ids, NaN pixels) in one case out of five."""
    if ctx.model is None or ctx.input_seed % 5:
        raise SkipStage("not this case")
    gen = torch.Generator().manual_seed(ctx.input_seed)
    hostile = {}
    for name, t in ctx.inputs.items():
        t = t.clone()
        flat = t.reshape(-1)
        if flat.numel():
            i = int(torch.randint(0, flat.numel(), (1,), generator=gen))
            if t.dtype.is_floating_point:
                flat[i] = [float("nan"), float("inf"), -float("inf"), 3e38][ctx.input_seed // 5 % 4]
            elif t.dtype != torch.bool:
                info = torch.iinfo(t.dtype)  # (10**6 where the dtype holds it: an int8 KV cache's rows do not)
                flat[i] = [-1, info.max, info.min, min(10**6, info.max)][ctx.input_seed // 5 % 4]
        hostile[name] = t
    _touch(ctx.model.run_dict(hostile))


def stage_generate(ctx: Context) -> None:
    """A decoder artifact's generate(): a prompt of token ids, then one-token steps from a bound plan whose recorded
    native runs read the cache length from a cell (runtime/bound_plan.py); one case in four a sampled one, one in
    five with an id past the vocabulary."""
    if ctx.model is None or ctx.model.manifest.decoder is None:
        raise SkipStage("not loaded" if ctx.model is None else "not a decoder")
    gen = torch.Generator().manual_seed(ctx.input_seed)
    ids = torch.randint(0, 64, (1, 3 + ctx.input_seed % 6), generator=gen)
    if ctx.input_seed % 5 == 0:
        ids[0, -1] = [-1, 10**6, 2**31 - 1][ctx.input_seed // 5 % 3]
    sampled = dict(temperature=0.8, top_k=5, top_p=0.9, seed=ctx.input_seed) if ctx.input_seed % 4 == 0 else {}
    result = ctx.model.generate(ids, max_new_tokens=5, stop_at_eos=False, **sampled)
    if any(len(row) != 5 for row in result.new_ids):
        raise BadOutput(f"generate made {[len(r) for r in result.new_ids]} tokens, not 5")


def stage_inspect_json(ctx: Context) -> None:
    """`ipexconvert inspect --json`."""
    from ipexconvert.inspection import summarize
    json.dumps(summarize(ctx.path))


def stage_inspect_text(ctx: Context) -> None:
    """`ipexconvert inspect` (the text report, which also prints an int8 artifact's per-layer table)."""
    from typer.testing import CliRunner
    from ipexconvert.cli import app
    os.environ["IPEXCONVERT_DEBUG"] = "1"  # the CLI re-raises unexpected exceptions instead of exit 3
    result = CliRunner().invoke(app, ["inspect", str(ctx.path)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception.with_traceback(result.exc_info[2] if result.exc_info else None)
    if result.exit_code not in (0, 2):
        raise RuntimeError(f"inspect exited with {result.exit_code}: {result.output[-500:]}")
    if result.exit_code == 2:
        raise IpexConvertError("inspect refused the artifact (exit 2)")


STAGES: dict[str, Callable[[Context], None]] = {
    "load": stage_load,
    "run_seed_inputs": stage_run_seed_inputs,
    "run_stored_inputs": stage_run_stored_inputs,
    "run_signature_inputs": stage_run_signature_inputs,
    "run_hostile_inputs": stage_run_hostile_inputs,
    "generate": stage_generate,
    "inspect_json": stage_inspect_json,
    "inspect_text": stage_inspect_text,
}


def _frame_text(filename: str, lineno: Any, name: str) -> str:
    short = filename[len(_PACKAGE_ROOT) + 1:] if filename.startswith(_PACKAGE_ROOT) else filename
    return f"{short}:{lineno} in {name}"


def _describe(e: BaseException) -> dict:
    if isinstance(e, IpexConvertError):
        outcome = "project_error"
    elif isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and any(s in str(e) for s in _ALLOC_FAILURES)):
        outcome = "oom"
    else:
        outcome = "nonproject"
    frames = traceback.extract_tb(e.__traceback__)
    project = [f for f in frames if f.filename.startswith(PACKAGE_DIR)]
    return {"outcome": outcome, "type": f"{type(e).__module__}.{type(e).__qualname__}".removeprefix("builtins."),
            "message": " ".join(str(e).split())[:600],
            "project_frame": _frame_text(project[-1].filename, project[-1].lineno, project[-1].name) if project else None,
            "frames": [_frame_text(f.filename, f.lineno, f.name) for f in frames[-8:]]}


def _from_ast_parse() -> bool:
    """The compile event comes from ast.parse (a parse only: no code object, nothing runs)."""
    frame = sys._getframe(2)
    for _ in range(3):
        if frame is None:
            return False
        if frame.f_code.co_name == "parse" and frame.f_code.co_filename.endswith("ast.py"):
            return True
        frame = frame.f_back
    return False


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(ctx: Context, stages: list[str], out_fd: int, err_path: Path) -> None:
    def send(message: dict) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        while data:
            data = data[os.write(out_fd, data):]

    def audit(event: str, args: tuple) -> None:
        hit = event.startswith(_EXEC_EVENTS)
        if event == "compile" and args and isinstance(args[0], (str, bytes)):
            text = args[0] if isinstance(args[0], str) else args[0].decode("latin-1")
            hit = (SENTINEL in text or MARKER in text) and not _from_ast_parse()
        elif event == "exec" and args and hasattr(args[0], "co_names"):
            text = repr(args[0].co_consts) + repr(args[0].co_names)
            hit = SENTINEL in text or MARKER in text
        elif event in ("open", "import") and args and (SENTINEL in str(args[0]) or MARKER in str(args[0])):
            hit = True
        if hit:
            send({"code_exec": {"event": event, "args": repr(args)[:300],
                                "stack": [_frame_text(f.filename, f.lineno, f.name) for f in traceback.extract_stack()[-8:-1]]}})

    err = open(err_path, "w")
    os.dup2(os.open(os.devnull, os.O_RDWR), 0)
    os.dup2(os.open(os.devnull, os.O_RDWR), 1)
    os.dup2(err.fileno(), 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
    limit = _vm_size() + ctx.limits.mem_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    faulthandler.enable(file=err, all_threads=True)
    faulthandler.dump_traceback_later(max(1.0, ctx.limits.timeout - 1.5), exit=False, file=err)
    warnings.simplefilter("ignore")
    sys.addaudithook(audit)
    for name in stages:
        send({"stage": name})
        start = time.monotonic()
        try:
            STAGES[name](ctx)
            result = {"outcome": "ok"}
        except SkipStage as e:
            result = {"outcome": "skipped", "message": str(e)[:200]}
        except BaseException as e:  # everything is classified; the parent decides what fails
            result = _describe(e)
        result["stage"] = name
        result["seconds"] = round(time.monotonic() - start, 3)
        send({"result": result})
    faulthandler.cancel_dump_traceback_later()


# ---- the parent -----------------------------------------------------------------------------------------------------

_FAULT_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def _fault_frame(stderr: str) -> str | None:
    """The most recent ipexconvert frame of the first thread in a faulthandler dump (SIGSEGV, or the hang dump)."""
    for m in _FAULT_FRAME.finditer(stderr):
        if m.group(1).startswith(PACKAGE_DIR):
            return _frame_text(m.group(1), m.group(2), m.group(3))
    return None


def execute(path: Path, inputs: dict[str, torch.Tensor], input_seed: int, limits: Limits,
            stages: list[str] | None = None) -> dict:
    """Run the stages on `path` in a forked child; a dict with the case's outcome, per-stage results and,
    for a crash or hang, the signal, the last ipexconvert frame faulthandler saw and the stderr tail."""
    stages = stages or list(STAGES)
    workdir = Path(tempfile.mkdtemp(prefix="ipxfuzz-case-"))
    err_fd, err_name = tempfile.mkstemp(prefix="ipxfuzz-stderr-")
    os.close(err_fd)
    err_path = Path(err_name)
    ctx = Context(Path(path).resolve(), inputs, input_seed, limits)
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the fuzzer
        try:
            os.close(r)
            os.chdir(workdir)
            _child(ctx, stages, w, err_path)
            os._exit(0)
        except BaseException:
            os._exit(70)
    os.close(w)
    buf, hung = b"", False
    deadline = start + limits.timeout
    poller = select.poll()
    poller.register(r, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            hung = True
            break
        if poller.poll(left * 1000):
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
    if hung:
        os.kill(pid, signal.SIGKILL)
    else:  # the pipe closed: the child is exiting (give it a moment, then stop it)
        for _ in range(200):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                pid = 0
                break
            time.sleep(0.01)
        if pid:
            os.kill(pid, signal.SIGKILL)
            hung = True
    if pid:
        status = os.waitpid(pid, 0)[1]
    os.close(r)
    seconds = time.monotonic() - start
    stderr = err_path.read_text(errors="replace") if err_path.exists() else ""
    err_path.unlink(missing_ok=True)
    leftovers = sorted(p.name for p in workdir.iterdir())
    shutil.rmtree(workdir, ignore_errors=True)
    return _result(buf, status if not hung else None, hung, leftovers, stderr, seconds)


def _result(buf: bytes, status: int | None, hung: bool, leftovers: list[str], stderr: str, seconds: float) -> dict:
    results, code_exec, current = [], [], None
    for line in buf.decode(errors="replace").splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "stage" in message:
            current = message["stage"]
        elif "result" in message:
            results.append(message["result"])
            current = None
        elif "code_exec" in message:
            code_exec.append({**message["code_exec"], "stage": current})
    if leftovers:
        code_exec.append({"event": "marker-file", "args": ", ".join(leftovers)[:300], "stage": current})
    findings: list[dict] = []
    for r in results:
        if r["outcome"] in FAILING:
            findings.append({"key": [r["outcome"], r["type"], r["project_frame"] or f"stage {r['stage']}"], **r})
    for c in code_exec:
        findings.append({"key": ["code_exec", c["event"], c["stage"] or "?"], "outcome": "code_exec", **c})
    exit_note = None
    if hung:
        frame = _fault_frame(stderr)
        findings.append({"key": ["hang", "timeout", frame or f"stage {current}"], "outcome": "hang", "stage": current,
                         "project_frame": frame, "stderr_tail": stderr[-3000:]})
    elif status is not None and (os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0 or current is not None):
        if os.WIFSIGNALED(status):
            sig = signal.Signals(os.WTERMSIG(status)).name
            outcome = "oom" if sig == "SIGKILL" else "crash"  # a SIGKILL we did not send: the kernel's OOM killer
        else:
            sig, outcome = f"exit {os.WEXITSTATUS(status)}", "crash"
        frame = _fault_frame(stderr)
        exit_note = sig
        findings.append({"key": [outcome, sig, frame or f"stage {current}"], "outcome": outcome, "stage": current,
                         "project_frame": frame, "stderr_tail": stderr[-3000:]})
    outcome = max([r["outcome"] for r in results if r["outcome"] != "skipped"] + [f["outcome"] for f in findings] + ["ok"],
                  key=SEVERITY.get)
    return {"outcome": outcome, "stages": results, "findings": findings, "exit": exit_note,
            "seconds": round(seconds, 3)}
