"""Helpers shared by the CLI tests (a module with a unique name, so test files can import it)."""
from __future__ import annotations

import textwrap
import traceback
from pathlib import Path

from typer.testing import CliRunner

from ipexconvert import cli as cli_module
from ipexconvert.cli import app

REPO = Path(__file__).resolve().parents[2]
FACTORY_MODULE = "ipxc_cli_testmodels"
# A wide console so rich does not wrap messages or paths; debug off so errors are handled as users see them.
# IPEXCONVERT_MAX_ISA passes through: the suite runs capped to reproduce smaller CPUs.
CLI_ENV = {"COLUMNS": "400", "IPEXCONVERT_DEBUG": None}

FACTORY_SOURCE = textwrap.dedent('''
    import torch


    class Small(torch.nn.Module):
        def __init__(self, hidden=8):
            super().__init__()
            self.fc = torch.nn.Linear(16, hidden)
            self.out = torch.nn.Linear(hidden, 4)

        def forward(self, x):
            return self.out(torch.relu(self.fc(x)))


    def build(hidden=8):
        torch.manual_seed(0)
        return Small(hidden).eval()


    class WithRand(torch.nn.Module):
        def forward(self, x):
            return x + torch.ops.aten.rand(list(x.shape))


    @torch.library.custom_op("ipxc_cli_test::scramble", mutates_args=())
    def scramble(x: torch.Tensor) -> torch.Tensor:
        return x.flip(-1).clone()


    @scramble.register_fake
    def _scramble_fake(x):
        return torch.empty_like(x)


    class WithCustomOp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            return scramble(self.fc(x))


    def build_custom():
        torch.manual_seed(0)
        return WithCustomOp().eval()
''')


def norm(text: str) -> str:
    """Whitespace-normalised text (rich may wrap or pad lines)."""
    return " ".join(text.split())


class Cli:
    """Invoke the typer app in-process; stdout and stderr are kept apart."""

    def __init__(self):
        self.runner = CliRunner(env=CLI_ENV)
        # rich reads COLUMNS when a console is made, at import: a pytest-xdist worker's COLUMNS=80 would stick.
        for console in (cli_module.out, cli_module.err):
            console.width = int(CLI_ENV["COLUMNS"])

    def __call__(self, *args, env: dict | None = None):
        return self.runner.invoke(app, [str(a) for a in args], env=env)


def describe(result) -> str:
    exc = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = "".join(traceback.format_exception(result.exception))
    return f"exit {result.exit_code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}\n{exc}"


def expect_exit(result, code: int) -> None:
    assert result.exit_code == code, describe(result)
    # Exit codes come from typer.Exit (SystemExit), never from an escaped exception.
    assert result.exception is None or isinstance(result.exception, SystemExit), describe(result)
    assert "Traceback" not in result.output, describe(result)


def expect_usage_error(result, *fragments: str) -> str:
    """Exit 2, an `error:` line and a `fix:` line on stderr, each fragment in the message. Returns stderr, normalised."""
    expect_exit(result, 2)
    text = norm(result.stderr)
    assert text.startswith("error:"), describe(result)
    assert "fix:" in text, describe(result)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in stderr\n{describe(result)}"
    return text
