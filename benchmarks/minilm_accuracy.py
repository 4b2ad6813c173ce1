"""INT8 all-MiniLM-L6-v2 (real weights) against eager float32 on held-out sentences, ours beside OpenVINO + NNCF.

Both quantize from the same calibration batches (`CALIBRATION_SENTENCES`, 160 lines in batches of 32) and are
judged on `SENTENCES` (128 other lines, no overlap): per-sentence cosine of the embedding with eager float32
(mean and minimum), nearest-neighbour agreement among the 128 (each sentence's closest other sentence unchanged),
and the top document of each retrieval query. Issue 21's bar: mean >= 0.998, minimum >= 0.997, neighbours >= 95%.

    python benchmarks/minilm_accuracy.py                       # ours (CLI defaults) and OpenVINO/NNCF if installed
    python benchmarks/minilm_accuracy.py --ours-only --smoothquant off
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F


def embed(model, sentences: list[str], batch: int) -> torch.Tensor:
    from ipexconvert.accuracy import flatten_outputs
    from ipexconvert.examples.minilm import tokenize

    out = []
    with torch.inference_mode():
        for i in range(0, len(sentences), batch):
            chunk = sentences[i:i + batch]
            inputs = tokenize(chunk + [chunk[-1]] * (batch - len(chunk)))  # static-shape peers want full batches
            out.append(flatten_outputs(model(**inputs))[0][:len(chunk)].float())
    return torch.cat(out)


def judge(name: str, got: dict, want: dict) -> str:
    from ipexconvert.accuracy import nearest_neighbours

    cos = F.cosine_similarity(got["sentences"], want["sentences"], dim=1)
    neighbours = (nearest_neighbours(got["sentences"]) == nearest_neighbours(want["sentences"])).float().mean()
    top = lambda r: (F.normalize(r["queries"], dim=1) @ F.normalize(r["documents"], dim=1).t()).argmax(1)  # noqa: E731
    retrieval = (top(got) == top(want)).float().mean()
    worst = cos.argsort()[:3].tolist()
    return (f"| {name} | {cos.mean():.5f} | {cos.min():.5f} | {neighbours:.1%} | {retrieval:.1%} | "
            f"{', '.join(f'{i}: {cos[i]:.4f}' for i in worst)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours-only", action="store_true")
    ap.add_argument("--smoothquant", default="auto")
    ap.add_argument("--observer", default=None, help="minmax, percentile or histogram (default: ipexconvert's choice)")
    ap.add_argument("--max-error", type=float, default=None, help="the accuracy guard's budget (default: its own)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import ipexconvert
    from ipexconvert.examples import get_example
    from ipexconvert.examples.minilm import tokenize
    from ipexconvert.examples.sentences import (CALIBRATION_SENTENCES, RETRIEVAL_DOCUMENTS, RETRIEVAL_QUERIES,
                                                SENTENCES)
    from ipexconvert.quant.options import QuantOptions

    torch.set_num_threads(args.threads)
    calibration = [tokenize(CALIBRATION_SENTENCES[i:i + args.batch]) for i in range(0, len(CALIBRATION_SENTENCES),
                                                                                   args.batch)]
    calibration = [c for c in calibration if c["input_ids"].shape[0] == args.batch]
    texts = {"sentences": list(SENTENCES), "queries": list(RETRIEVAL_QUERIES), "documents": list(RETRIEVAL_DOCUMENTS)}
    eager = get_example("minilm").build().eval()
    run = lambda m: {k: embed(m, v, args.batch) for k, v in texts.items()}  # noqa: E731
    want = run(eager)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "minilm.int8.ipxc"
        result = ipexconvert.optimize("example:minilm", dtype="int8", output=path, calibration=calibration,
                                      quant=QuantOptions(smoothquant=args.smoothquant, observer=args.observer,
                                                         max_error=args.max_error))
        plan = result.manifest.quantization
        kept = [n for n, layer in plan["layers"].items() if not layer["quantized"]]
        ours = ipexconvert.load_artifact(path, threads=args.threads)
        rows.append(judge(f"ipexconvert int8 (smoothquant {args.smoothquant}, observer {args.observer or 'default'}, "
                          f"guard budget {args.max_error or 'default'}, {len(kept)} layers kept in float)",
                          run(ours), want))
    rows.append(judge("eager bf16 (no quantization, for scale)", run(get_example("minilm").build().eval().bfloat16()),
                      want))
    if not args.ours_only:
        sys.path.insert(0, str(Path(__file__).parent))
        from peers import openvino_peer

        example = tokenize(SENTENCES[:args.batch])
        for precision in ("f32", "bf16"):
            ov = openvino_peer.build_int8(eager, example, args.threads, calibration, transformer=True,
                                          precision=precision)
            rows.append(judge(f"OpenVINO + NNCF int8 (TRANSFORMER, rest {precision})", run(ov), want))
    print(f"{len(SENTENCES)} held-out sentences, {len(RETRIEVAL_QUERIES)} retrieval queries; calibration "
          f"{len(calibration)} batches of {args.batch} other sentences")
    print("| system | mean cosine | min cosine | nearest neighbour kept | top document kept | worst sentences |")
    print("|---|---:|---:|---:|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
