"""QDQ export targets: our int8 artifact exported as QDQ ONNX, run by ONNX Runtime, against ONNX
Runtime's own quantize_static result on the same calibration batches, and against our artifact.

    python benchmarks/onnx_qdq.py [--cases resnet50-b1 bert-base-b1] [--calib 8] [--rounds 12] [--calls 5]
                                  [--threads 2] [--name NAME]

Per case: the example is exported with torch.onnx.export (fp32), quantized by ORT's quantize_static
(QDQ, per-channel int8 weights, uint8 activations, MinMax) on `--calib` example batches; the same
batches calibrate `ipexconvert optimize --dtype int8`, whose artifact `ipexconvert export` writes as
QDQ. Timed in interleaved rounds (order reversed every other round): `ort-ours` (ORT on our QDQ file),
`ort-static` (ORT on its own), `ipexconvert` (the int8 artifact), `ipexconvert-from-qdq` (ORT's QDQ
model converted back with `--dtype int8`: its own scales; the batches only feed the accuracy guard). Accuracy: cosine of
ORT-on-ours against our artifact, of the from-QDQ artifact against ORT on that model, and of each int8
result against eager fp32. Writes benchmarks/results/NAME.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

import ipexconvert
from ipexconvert.errors import AccuracyError
from ipexconvert.examples import get_example
from ipexconvert.examples.onnx_export import export_example
from ipexconvert.export.onnx import export_onnx
from onnx_import import cosine, cpu_model, interleaved, ort_options  # the same timing and metrics as the import benchmark

CASES = {"resnet50-b1": ("resnet50", 1), "bert-base-b1": ("bert-base", 1), "minilm-b8": ("minilm", 8),
         "tiny-bert-b1": ("tiny-bert", 1), "tiny-cnn-b1": ("tiny-cnn", 1)}


def calibration_batches(example, batch: int, count: int) -> list[dict[str, torch.Tensor]]:
    batches = []
    for i in range(count):
        torch.manual_seed(1000 + i)
        inputs = example.example_inputs(batch)
        batches.append({k: (torch.randn_like(v) if v.is_floating_point() else v) for k, v in inputs.items()})
    return batches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["resnet50-b1", "bert-base-b1", "minilm-b8"], choices=list(CASES))
    parser.add_argument("--calib", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--name", default=time.strftime("onnx-qdq-%Y%m%d-%H%M"))
    args = parser.parse_args()
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    torch.set_num_threads(args.threads)
    options = ort_options(args.threads)
    cpu = cpu_model()
    results = {"command": " ".join(["python", *sys.argv]), "cpu": cpu, "torch": torch.__version__,
               "onnxruntime": ort.__version__, "cases": {}}
    work = Path(tempfile.mkdtemp(prefix="onnx-qdq-"))
    for case in args.cases:
        name, batch = CASES[case]
        example = get_example(name)
        fp32_onnx = export_example(name, work / f"{name}.onnx", batch=batch)
        batches = calibration_batches(example, batch, args.calib)

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.items = iter([{k: v.numpy() for k, v in b.items()} for b in batches])

            def get_next(self):
                return next(self.items, None)

        static = work / f"{name}.ort-static.onnx"
        quantize_static(str(fp32_onnx), str(static), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        artifact = ipexconvert.optimize(f"example:{name}", dtype="int8", calibration=batches,
                                        output=work / f"{name}.int8.ipxc").path
        # ORT's QDQ model imported back: int8 with its scales (the batches only feed the accuracy guard and check)
        try:
            from_qdq = ipexconvert.optimize(static, dtype="int8", calibration=batches,
                                            output=work / f"{name}.from-qdq.int8.ipxc").path
            refused = None
        except AccuracyError as e:  # recorded: e.g. a QDQ model far from its own float model
            from_qdq, refused = None, str(e).split("; nothing")[0]
        ours, report = export_onnx(artifact, work / f"{name}.ours.onnx", check=True)
        inputs = example.example_inputs(batch)
        feeds = {k: v.numpy() for k, v in inputs.items()}
        model = ipexconvert.load_artifact(artifact, threads=args.threads)
        model_qdq = ipexconvert.load_artifact(from_qdq, threads=args.threads) if from_qdq else None
        s_ours = ort.InferenceSession(str(ours), options, providers=["CPUExecutionProvider"])
        s_static = ort.InferenceSession(str(static), options, providers=["CPUExecutionProvider"])
        with torch.no_grad():
            eager = example.build()(**inputs)
        eager = eager[0] if isinstance(eager, tuple) else eager
        art_out = model(**inputs)
        art_out = art_out[0] if isinstance(art_out, tuple) else art_out
        qdq_out = model_qdq(**inputs) if model_qdq else None
        qdq_out = qdq_out[0] if isinstance(qdq_out, tuple) else qdq_out
        row = {
            "from_qdq_refused": refused,
            "cosine_imported_qdq_vs_ort_static": None if refused else round(cosine(qdq_out, s_static.run(None, feeds)[0]), 6),
            "cosine_ort_ours_vs_artifact": round(cosine(s_ours.run(None, feeds)[0], art_out), 6),
            "cosine_vs_eager_fp32": {"ort-ours": round(cosine(s_ours.run(None, feeds)[0], eager), 6),
                                     "ort-static": round(cosine(s_static.run(None, feeds)[0], eager), 6),
                                     "ipexconvert": round(cosine(art_out, eager), 6),
                                     "ipexconvert-from-qdq": None if refused else round(cosine(qdq_out, eager), 6)},
            "export_check": report,
        }
        systems = {"ort-ours": lambda: s_ours.run(None, feeds), "ort-static": lambda: s_static.run(None, feeds),
                   "ipexconvert": lambda: model(**inputs)}
        if model_qdq is not None:
            systems["ipexconvert-from-qdq"] = lambda: model_qdq(**inputs)
        with torch.no_grad():
            for fn in systems.values():
                fn()
            row["median_ms"] = {k: round(v, 3) for k, v in interleaved(systems, args.rounds, args.calls).items()}
        row["ort_ours_over_static"] = round(row["median_ms"]["ort-ours"] / row["median_ms"]["ort-static"], 3)
        results["cases"][case] = row
        print(case, json.dumps(row), flush=True)
    out_dir = Path(__file__).parent / "results"
    (out_dir / f"{args.name}.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"# QDQ export: {args.name}", "", f"Command: `{results['command']}`", "",
             f"CPU: {cpu}, torch {results['torch']}, onnxruntime {results['onnxruntime']}, {args.threads} threads; "
             f"medians of {args.rounds} interleaved rounds of {args.calls} calls; {args.calib} calibration batches.", "",
             "| case | ORT on our QDQ ms | ORT quantize_static ms | ratio | ipexconvert int8 ms | ipexconvert int8 from "
             "ORT's QDQ ms | cosine ORT-ours vs artifact | cosine from-QDQ artifact vs ORT static "
             "| cosine vs eager fp32 (ours-ORT / static / artifact / from-QDQ) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for case, row in results["cases"].items():
        ms, c = row["median_ms"], row["cosine_vs_eager_fp32"]
        def num(v, fmt):
            return "refused" if v is None else format(v, fmt)

        lines.append(f"| {case} | {ms['ort-ours']:.2f} | {ms['ort-static']:.2f} | {row['ort_ours_over_static']:.3f} | "
                     f"{ms['ipexconvert']:.2f} | {num(ms.get('ipexconvert-from-qdq'), '.2f')} | "
                     f"{row['cosine_ort_ours_vs_artifact']:.6f} | {num(row['cosine_imported_qdq_vs_ort_static'], '.6f')} | "
                     f"{c['ort-ours']:.6f} / {c['ort-static']:.6f} / {c['ipexconvert']:.6f} / "
                     f"{num(c['ipexconvert-from-qdq'], '.6f')} |")
    for case, row in results["cases"].items():
        if row["from_qdq_refused"]:
            lines += ["", f"{case}: converting ORT's QDQ model back was refused: {row['from_qdq_refused']}"]
    (out_dir / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
