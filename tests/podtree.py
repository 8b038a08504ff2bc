"""A kubelet tree for the many-source follower's unit tests: pod folders, CRI lines, a clock to step."""

from __future__ import annotations

from pathlib import Path


class Clock:
    """A monotonic clock the test moves (`now`); `step`: how far each reading moves it (1.0: every poll
    of a `ManyFollower` is a full sweep)."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def pod(root: Path, name: str, restart: int = 0) -> Path:
    """The restart file of container `vllm` of pod `name` in namespace `vllm` (its folders made)."""
    folder = root / f"vllm_{name}_uid-{name}" / "vllm"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{restart}.log"


def write(path: Path, *texts: str) -> None:
    """Append each text as one CRI stdout line."""
    with path.open("a") as f:
        for text in texts:
            f.write(f"2025-07-05T11:29:01Z stdout F {text}\n")
