"""Which of int8 all-MiniLM-L6-v2's 36 linear layers cost its worst held-out sentence its accuracy? The default
plan (calibrated as benchmarks/minilm_accuracy.py does) is written out with --qconfig-out, then each layer in turn
is kept in float (the plan read back with qconfig_in, the guard off) and the held-out sentences are judged against
eager float32: mean and minimum sentence cosine, and the cosine of the sentence that is worst by default.

    python benchmarks/minilm_float_layers.py
"""
from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from minilm_accuracy import embed  # noqa: E402


def main() -> None:
    import ipexconvert
    from ipexconvert.examples import get_example
    from ipexconvert.examples.minilm import tokenize
    from ipexconvert.examples.sentences import CALIBRATION_SENTENCES, SENTENCES
    from ipexconvert.quant.options import QuantOptions

    torch.set_num_threads(2)
    batch = 32
    calibration = [tokenize(CALIBRATION_SENTENCES[i:i + batch]) for i in range(0, len(CALIBRATION_SENTENCES), batch)]
    calibration = [c for c in calibration if c["input_ids"].shape[0] == batch]
    want = embed(get_example("minilm").build().eval(), list(SENTENCES), batch)

    def cosines(path: Path) -> torch.Tensor:
        got = embed(ipexconvert.load_artifact(path, threads=2), list(SENTENCES), batch)
        return F.cosine_similarity(got, want, dim=1)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ipexconvert.optimize("example:minilm", dtype="int8", output=tmp / "default.ipxc", calibration=calibration,
                             qconfig_out=tmp / "plan.json")
        default = cosines(tmp / "default.ipxc")
        worst = int(default.argmin())
        plan = json.loads((tmp / "plan.json").read_text())
        print(f"worst sentence by default: {worst} {SENTENCES[worst]!r}")
        print(f"| kept in float | mean cosine | min cosine | sentence {worst} |")
        print("|---|---:|---:|---:|")
        print(f"| none (default plan) | {default.mean():.5f} | {default.min():.5f} | {default[worst]:.5f} |", flush=True)
        for name in plan["layers"]:
            edited = copy.deepcopy(plan)
            edited["layers"][name]["quantized"] = False
            (tmp / "edited.json").write_text(json.dumps(edited))
            ipexconvert.optimize("example:minilm", dtype="int8", output=tmp / "edited.ipxc", calibration=calibration,
                                 quant=QuantOptions(qconfig_in=tmp / "edited.json", guard=False))
            cos = cosines(tmp / "edited.ipxc")
            print(f"| {name} | {cos.mean():.5f} | {cos.min():.5f} | {cos[worst]:.5f} |", flush=True)


if __name__ == "__main__":
    main()
