"""permute: permute, and transpose/t as a permute that swaps two axes (needs the input's rank)."""
from ._registry import Args, Converted, maps_to


def _axis(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


@maps_to("permute", "aten.permute.default", "aten.transpose.int", "aten.t.default")
def to_permute(target: str, args: Args) -> Converted:
    x = args["self"]
    rank = len(x.meta["val"].shape)
    if target == "aten.permute.default":
        perm = [_axis(int(d), rank) for d in args["dims"]]
    else:
        d0, d1 = (0, 1) if target == "aten.t.default" else (_axis(int(args["dim0"]), rank), _axis(int(args["dim1"]), rank))
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return [x], {"perm": perm}
