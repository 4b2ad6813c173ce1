"""Calibration -> QuantPlan: which layers go int8, with which input ranges, weights and smoothing.

Runs on the float32 program after the float passes (BN folded, post-ops fused), before
to_bf16, so calibration sees float32 activations and the plan's node names are the ones
the quantize pass will find. Three passes over the calibration batches (reference ops):
1. SmoothQuant statistics (per-channel max |x|, sampled rows) for transformer linears;
2. observers on every quantized layer's (smoothed) input -> scale and zero point, and on its output
   (convs read only as a residual operand with the same observer: int8_residual keeps those in uint8;
   the others min/max, for ONNX export);
3. per-layer sensitivity on the held-out batches (the accuracy guard's ranking).
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F

from ..errors import UserInputError
from ..ir import Node, Program
from . import smoothquant as sq
from .calibrate import run_with_taps
from .observers import make_observer, qparams_from_range
from .options import ALPHA_GRID, QuantOptions
from .plan import ActivationQuant, LayerPlan, LayerTensors, Quantization, QuantPlan, Smoothing
from .weights import quantize_weight

Progress = Callable[[str, int], Callable[[], None]]  # (stage description, total batches) -> tick

_TRANSFORMER_OPS = {"layer_norm", "rms_norm", "add_layer_norm", "sdpa"}
# Defaults per model family, chosen by measurement (docs/quantization.md): transformers after
# SmoothQuant are fine with plain min/max; CNN activations clip well with the MSE search.
DEFAULT_OBSERVER = {"transformer": "minmax", "cnn": "histogram"}


def family(program: Program) -> str:
    return "transformer" if any(n.op in _TRANSFORMER_OPS for n in program.graph.nodes) else "cnn"


def quantizable(program: Program) -> list[Node]:
    """linear / conv2d with constant weights (and bias) reading a float activation."""
    values, found = program.graph.values, []
    for node in program.graph.nodes:
        if node.op not in ("linear", "conv2d") or len(node.inputs) < 2:
            continue
        x, w = node.inputs[0], node.inputs[1]
        b = node.inputs[2] if len(node.inputs) > 2 else None
        if (x is None or program.is_constant(x) or not program.is_constant(w) or (b is not None and not program.is_constant(b))
                or values[x].dtype not in ("float32", "bfloat16")):
            continue
        found.append(node)
    return found


def _no_progress(stage: str, total: int) -> Callable[[], None]:
    return lambda: None


def plan_quantization(program: Program, calibration: list[dict], held_out: list[dict], options: QuantOptions,
                      *, description: str = "", synthetic: bool = False, float_dtype: str = "float32",
                      imported: Optional[QuantPlan] = None, progress: Progress = _no_progress) -> Quantization:
    """Plan (and apply SmoothQuant's exact weight rewrites to) `program`; the quantize pass does the rest."""
    targets = quantizable(program)
    if not targets:
        raise UserInputError("the model has no linear or conv2d layer with constant weights to quantize",
                             "use --dtype bf16 (or fp32) for this model")
    fam = family(program)
    if imported is not None:
        _check_imported(imported, targets)
    observer_name = "model" if imported is not None and imported.observer == "model" else (
        options.observer or DEFAULT_OBSERVER[fam])
    plan = QuantPlan(activation_dtype=options.activation_dtype, observer=observer_name,
                     smoothquant=str(options.smoothquant) if fam == "transformer" else "off (not a transformer)",
                     float_dtype=float_dtype, calibration=description, calibration_synthetic=synthetic,
                     calibration_batches=len(calibration), held_out_batches=len(held_out))
    weights = {n.name: program.weights[n.inputs[1]].float() for n in targets}
    smooth: dict[str, torch.Tensor] = {}  # layer -> factors applied through the quantize multiplier
    if imported is not None:
        _apply_imported_smoothing(program, targets, imported, weights, smooth, plan)
    elif fam == "transformer" and options.smoothquant != "off":
        _smooth(program, [n for n in targets if n.op == "linear"], calibration, options, weights, smooth, plan, progress)

    inputs, outputs = ({}, {}) if imported is not None else _observe(
        program, targets, calibration, observer_name, smooth, progress)
    quantization = Quantization(plan)
    multipliers: dict[tuple, torch.Tensor] = {}  # one tensor per (factors, scale): its layers share a quantize node
    for node in targets:
        if imported is not None:  # a layer the qconfig does not list stays float (no observer ran for it)
            act = imported.layers[node.name].input if node.name in imported.layers else None
            out = imported.layers[node.name].output if node.name in imported.layers else None
        else:
            act = _activation(inputs[node.name], options.activation_dtype, observer_name)
            out = outputs.get(node.name)
            out = None if out is None else _activation(out, options.activation_dtype, out.name)
        layer = plan.layers.get(node.name) or LayerPlan(node=node.name, op=node.op)
        layer.output = out
        if act is None:
            given = imported.layers[node.name].fallback_reason if node.name in imported.layers else None
            layer.quantized, layer.fallback_reason = False, given or "not quantized in the imported qconfig"
            plan.layers[node.name] = layer
            continue
        w = weights[node.name]
        s = smooth.get(node.name)
        wq, wscale = quantize_weight(w if s is None else w * s)
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        multiplier = None
        if s is not None:
            key = (id(s), act.scale)
            if key not in multipliers:
                multipliers[key] = (1.0 / (s * act.scale)).float()
            multiplier = multipliers[key]
        quantization.tensors[node.name] = LayerTensors(wq, wscale, None if bias is None else program.weights[bias].float(),
                                                       multiplier)
        layer.input = act
        layer.weight_scale_min, layer.weight_scale_max = float(wscale.min()), float(wscale.max())
        if imported is not None and node.name in imported.layers and not imported.layers[node.name].quantized:
            layer.quantized, layer.fallback_reason = False, imported.layers[node.name].fallback_reason or "qconfig"
        plan.layers[node.name] = layer
    _sensitivity(program, targets, held_out or calibration[:1], quantization, progress)
    return quantization


def _check_imported(imported: QuantPlan, targets: list[Node]) -> None:
    """A qconfig written for another model must not be applied by matching a few common node names."""
    ops = {n.name: n.op for n in targets}
    unknown = [name for name, layer in imported.layers.items() if ops.get(name) != layer.op]
    if unknown:
        raise UserInputError(f"the qconfig names {len(unknown)} layer(s) this model does not have (or with another op): "
                             f"{', '.join(unknown[:8])}{' ...' if len(unknown) > 8 else ''}",
                             "export a qconfig from this model with --qconfig-out, then edit that one")


def _smooth(program, linears, calibration, options, weights, smooth, plan, progress) -> None:
    groups = sq.find_groups(program, linears)
    rows = max(1, options.sample_rows // max(1, len(calibration)))
    taps = {}
    for g in groups:
        taps.setdefault(g.value, []).append(lambda x, g=g: g.observe(x, rows))
    run_with_taps(program, calibration, taps, progress("SmoothQuant statistics", len(calibration)))
    for g in groups:
        ws = [weights[n.name] for n in g.linears]
        alpha, errors = sq.choose_alpha(g, ws, options.smoothquant, ALPHA_GRID, options.activation_dtype)
        if errors and errors[alpha] >= sq.group_error(torch.cat(g.samples), ws, None, options.activation_dtype):
            continue  # smoothing does not help this group: leave it alone
        s = sq.factors(g.absmax, ws, alpha)
        g.samples.clear()
        _apply_smoothing(program, g.linears, g.norm, s, weights, smooth)
        for n in g.linears:
            plan.layers[n.name] = LayerPlan(node=n.name, op="linear", smoothing=sq_record(g, alpha, s))
    program.prune()


def _apply_smoothing(program, linears, norm, s: torch.Tensor, weights, smooth) -> None:
    """1/s into the norm (and s into the linears' float weights, so a fallback layer stays exact),
    or, without a norm, s recorded for the quantize step's multiplier."""
    if norm is None:
        for n in linears:
            smooth[n.name] = s
        return
    sq.fold_into_norm(program, norm, s)
    for n in linears:
        new = weights[n.name] * s
        n.inputs[1] = program.add_constant(f"{n.inputs[1]}_smoothed", new.to(program.weights[n.inputs[1]].dtype))
        weights[n.name] = new


def sq_record(g: sq.SmoothGroup, alpha: float, s: torch.Tensor) -> Smoothing:
    return Smoothing(alpha=alpha, folded_into=g.norm.name if g.norm is not None else "quantize",
                     group=[n.name for n in g.linears], factors=[round(float(v), 6) for v in s])


def _apply_imported_smoothing(program, targets, imported: QuantPlan, weights, smooth, plan) -> None:
    """Re-apply the smoothing a qconfig file records (factors are data, not re-derived)."""
    by_name = {n.name: n for n in targets}
    producers = program.graph.producers()
    done: set[str] = set()
    for name, layer in imported.layers.items():
        if layer.smoothing is None or name not in by_name or name in done:
            continue
        s = torch.tensor(layer.smoothing.factors, dtype=torch.float32)
        members = [by_name[m] for m in layer.smoothing.group if m in by_name]
        if layer.smoothing.folded_into != "quantize":
            norm = producers.get(members[0].inputs[0])
            if norm is None or norm.name != layer.smoothing.folded_into:
                raise UserInputError(f"the qconfig folds smoothing of {name} into {layer.smoothing.folded_into}, "
                                     "which this model does not have", "export a qconfig from this model first")
        else:
            norm = None
        _apply_smoothing(program, members, norm, s, weights, smooth)
        for n in members:
            plan.layers[n.name] = LayerPlan(node=n.name, op="linear", smoothing=layer.smoothing)
            done.add(n.name)
    program.prune()


def _activation(obs, dtype: str, observer_name: str) -> ActivationQuant:
    lo, hi = obs.range()
    scale, zp = qparams_from_range(lo, hi, dtype)
    summary = obs.summary()
    return ActivationQuant(dtype=dtype, scale=scale, zero_point=zp, lo=lo, hi=hi, observer=observer_name,
                           observed_min=summary.get("min"), observed_max=summary.get("max"))


def residual_sources(program: Program, targets: list[Node]) -> list[Node]:
    """conv2d layers whose output is read only as a conv2d's residual (add post-op) operand.

    int8_residual may keep such a value in uint8 (ResNet's downsample branch), so its range
    is calibrated too; the pass decides whether it really does.
    """
    graph, users = program.graph, program.graph.users()

    def residual_read(reader: Node, value: str) -> bool:
        return reader.op == "conv2d" and any(p.get("kind") == "add" and p.get("operand") is not None
                                             and reader.inputs[p["operand"]] == value
                                             for p in reader.attrs.get("post_ops", []))

    return [n for n in targets if n.op == "conv2d" and n.outputs[0] not in graph.outputs and users.get(n.outputs[0])
            and all(residual_read(r, n.outputs[0]) for r in users[n.outputs[0]])]


def _observe(program, targets, calibration, observer_name, smooth, progress) -> tuple[dict, dict]:
    """Observers per layer for its input and, for residual sources, its output; one calibration run.

    Inputs: one observer per distinct (input value, smoothing), shared by the layers reading it.
    """
    observers: dict[tuple, object] = {}
    per_layer, per_output = {}, {}
    taps: dict[str, list] = {}
    for node in targets:
        s = smooth.get(node.name)
        key = (node.inputs[0], None if s is None else id(s))
        if key not in observers:
            obs = make_observer(observer_name)
            observers[key] = obs
            taps.setdefault(node.inputs[0], []).append(
                (lambda x, o=obs: o.update(x)) if s is None else (lambda x, o=obs, s=s: o.update(x.float() / s)))
        per_layer[node.name] = observers[key]
    residual = {n.name for n in residual_sources(program, targets)}
    for node in targets:
        # Residual sources with the model's observer (int8_residual may keep them in uint8); the other
        # outputs with min/max, for ONNX export (runtimes fuse integer kernels only between Q/DQ pairs).
        obs = per_output[node.name] = make_observer(observer_name if node.name in residual else "minmax")
        taps.setdefault(node.outputs[0], []).append(lambda x, o=obs: o.update(x))
    run_with_taps(program, calibration, taps, progress("calibrating activation ranges", len(calibration)))
    return per_layer, per_output


def _layer_output(node: Node, x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor]) -> torch.Tensor:
    if node.op == "linear":
        return F.linear(x, w, b)
    a = node.attrs
    return F.conv2d(x, w, b, a.get("stride", [1, 1]), a.get("padding", [0, 0]), a.get("dilation", [1, 1]),
                    a.get("groups", 1))


def _sensitivity(program, targets, batches, quantization: Quantization, progress) -> None:
    """Relative error of each layer's output (before post-ops) with its input and weight quantized."""
    from ..ir.ops._quant import dequantize, dequantize_weight, quantize

    errors: dict[str, list[float]] = {}
    taps: dict[str, list] = {}
    for node in targets:
        t = quantization.tensors.get(node.name)
        layer = quantization.plan.layers[node.name]
        if t is None:
            continue
        w_float = program.weights[node.inputs[1]].float()
        bias = t.bias
        act = layer.input

        def tap(x, node=node, t=t, w_float=w_float, bias=bias, act=act):
            x = x.float()
            want = _layer_output(node, x, w_float, bias)
            xq = quantize(x, act.scale, act.zero_point, act.dtype, t.multiplier)
            got = _layer_output(node, dequantize(xq, act.scale, act.zero_point), dequantize_weight(t.weight, t.weight_scale), bias)
            errors.setdefault(node.name, []).append(float((got - want).norm() / want.norm().clamp_min(1e-12)))

        taps.setdefault(node.inputs[0], []).append(tap)
    run_with_taps(program, batches, taps, progress("measuring per-layer sensitivity", len(batches)))
    for name, errs in errors.items():
        quantization.plan.layers[name].sensitivity = round(max(errs), 6)
