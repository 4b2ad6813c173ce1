"""`example:NAME`: a built-in model (see ipexconvert.examples)."""
from __future__ import annotations

from ....errors import UserInputError
from ....manifest import SourceRecord
from ..decoder_record import decoder_record
from .base import ResolvedSource, SourceRequest

PREFIX = "example:"


def matches(request: SourceRequest) -> bool:
    return request.location.startswith(PREFIX)


def load(request: SourceRequest) -> ResolvedSource:
    from ....examples import get_example

    name = request.location[len(PREFIX):]
    try:
        example = get_example(name)
    except ValueError as e:
        raise UserInputError(str(e), "pick one of the names above, e.g. example:tiny-cnn") from None
    try:
        module = example.build()
    except ModuleNotFoundError as e:
        raise UserInputError(f"example {name} needs a package that is not installed: {e}",
                             "pip install 'ipexconvert[examples]'") from None
    batch = 1
    return ResolvedSource(
        record=SourceRecord(kind="example", location=name),
        module=module,
        example_inputs=example.example_inputs(batch),
        dynamic=example.dynamic_dims,
        output_names=list(example.output_names),
        tokenizer_folder=example.tokenizer_folder() if example.tokenizer_folder else None,
        decoder=decoder_record(module),
    )
