"""An image file of `compare -o` and `audit -o`: its kind checked before any work, the figure rendered
in memory and written by us (matplotlib's own file writes lose errors such as a full disk: the command
would succeed with a cut image)."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING

from ...errors import OutputError, UsageError
from .collect import DPI, require_matplotlib

if TYPE_CHECKING:
    from matplotlib.figure import Figure

IMAGE_KINDS = ("png", "svg", "pdf")


def check_image_output(output: str) -> None:
    """Raise `UsageError` for an output that is not an image file name; matplotlib must be there."""
    if output == "-":
        raise UsageError("-o -: standard output carries the tables; give an image file name")
    if os.path.splitext(output)[1][1:].lower() not in IMAGE_KINDS:
        raise UsageError(f"{output}: the image is .png, .svg or .pdf")
    require_matplotlib()


def write_figure(fig: Figure, output: str) -> None:
    """Render `fig` in memory in the kind its name says, then write it. Raises `OutputError`."""
    image = io.BytesIO()
    fig.savefig(image, dpi=DPI, format=os.path.splitext(output)[1][1:].lower())
    try:
        with open(output, "wb") as fh:
            fh.write(image.getbuffer())
    except OSError as exc:
        raise OutputError(f"{output}: cannot write ({exc.strerror or exc})") from None
