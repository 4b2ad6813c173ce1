"""Write a built-in example as an ONNX file, to try `ipexconvert optimize model.onnx` offline.

    python -m ipexconvert.examples.onnx_export resnet50 build/resnet50.onnx [--batch 1]

It uses torch.onnx.export's TorchScript exporter (opset 17, no extra packages), naming the inputs,
outputs and dynamic axes as the example declares them.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

from . import get_example

OPSET = 17


def export_example(name: str, path: Path, batch: int = 1) -> Path:
    example = get_example(name)
    model = example.build().eval()
    inputs = example.example_inputs(batch)
    dynamic_axes = {name: {axis: dim.name for axis, dim in axes.items()} for name, axes in example.dynamic_dims.items()
                    if name in inputs}
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(model, tuple(inputs.values()), str(path), input_names=list(inputs),
                          output_names=list(example.output_names), dynamic_axes=dynamic_axes,
                          opset_version=OPSET, dynamo=False)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a built-in example (ipexconvert examples lists them)")
    parser.add_argument("output", type=Path, help="the .onnx file to write")
    parser.add_argument("--batch", type=int, default=1, help="batch size of the traced example (default 1)")
    args = parser.parse_args(argv)
    print(export_example(args.name, args.output, args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
