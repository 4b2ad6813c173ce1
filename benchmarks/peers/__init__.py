"""Optional peer systems for `benchmarks/run.py` (other inference stacks timed next to ipexconvert).

Each peer lives in its own module and imports its stack lazily, so the runner works without any
of them installed; `--peers NAME` turns one on. Today: `openvino` (openvino_peer.py) and
`onnxruntime` (onnxruntime_peer.py).
"""
