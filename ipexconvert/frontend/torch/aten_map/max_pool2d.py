"""max_pool2d: floor-mode pooling with every size as a pair (ceil mode: Unconvertible)."""
from __future__ import annotations

from ._registry import Args, Converted, Unconvertible, maps_to


def _pair(v, default) -> list[int]:
    """A pair from torch's int-or-list argument; empty or None means `default` (stride defaults to the kernel)."""
    v = list(v) if v else list(default)
    return v * 2 if len(v) == 1 else v


@maps_to("max_pool2d", "aten.max_pool2d.default")
def to_max_pool2d(target: str, args: Args) -> Converted:
    if args.get("ceil_mode"):
        raise Unconvertible("ceil_mode")
    k = _pair(args["kernel_size"], [1])
    return [args["self"]], {"kernel_size": k, "stride": _pair(args.get("stride"), k),
                            "padding": _pair(args.get("padding"), [0]), "dilation": _pair(args.get("dilation"), [1])}
