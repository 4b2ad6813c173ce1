"""matmul: torch.matmul and the 2-D/3-D products it is made of (mm, bmm name the rhs mat2)."""
from ._registry import Args, Converted, Unconvertible, maps_to


@maps_to("matmul", "aten.matmul.default", "aten.bmm.default", "aten.mm.default")
def to_matmul(target: str, args: Args) -> Converted:
    return [args["self"], args.get("other", args.get("mat2"))], {}


@maps_to("matmul", "aten.addmm.default")
def addmm_to_matmul(target: str, args: Args) -> Converted:
    """bias + mat1 @ mat2 (GPT-2's Conv1D layers): a matmul with the bias as an add post-op, which
    matmul_to_linear turns into a linear's bias. Scaled forms (beta, alpha != 1) are not modelled."""
    if args.get("beta", 1) != 1 or args.get("alpha", 1) != 1:
        raise Unconvertible("addmm with beta or alpha other than 1")
    return [args["mat1"], args["mat2"], args["self"]], {"post_ops": [{"kind": "add", "operand": 2}]}
