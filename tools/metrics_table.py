"""Print the metric table of the docs from `vllm_logwatch/exporting/catalogue.py`, or check / rewrite it
in a file (docs/metrics.md unless another is named).

    python tools/metrics_table.py                     # print the Markdown table
    python tools/metrics_table.py --check             # exit 1 if the table in docs/metrics.md differs
    python tools/metrics_table.py --write             # replace the table in docs/metrics.md
    python tools/metrics_table.py --check FILE        # the same for another file

The table sits between `<!-- metrics-table:start -->` and `<!-- metrics-table:end -->`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vllm_logwatch.exporting.catalogue import METRICS, MetricSpec

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "metrics.md"
START = "<!-- metrics-table:start -->"
END = "<!-- metrics-table:end -->"


def exposed_name(spec: MetricSpec) -> str:
    """The name as scraped: counters end in `_total`, info metrics in `_info`."""
    suffix = {"counter": "_total", "info": "_info"}.get(spec.type, "")
    return spec.name + suffix


def table() -> str:
    rows = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for spec in METRICS:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "-"
        meaning = spec.help.replace("|", "\\|")
        rows.append(f"| `{exposed_name(spec)}` | {spec.type} | {labels} | {meaning} |")
    return "\n".join(rows) + "\n"


def replace_block(text: str, block: str) -> str:
    head, sep, rest = text.partition(START)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"markers {START} ... {END} not found")
    return f"{head}{START}\n{block}{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", metavar="FILE", type=Path, nargs="?", const=DOCS,
                       help="exit 1 if the table in FILE (default docs/metrics.md) differs")
    group.add_argument("--write", metavar="FILE", type=Path, nargs="?", const=DOCS,
                       help="replace the table in FILE (default docs/metrics.md)")
    args = parser.parse_args()
    if args.check is None and args.write is None:
        sys.stdout.write(table())
        return 0
    path: Path = args.check or args.write
    text = path.read_text(encoding="utf-8")
    wanted = replace_block(text, table())
    if args.write is not None:
        path.write_text(wanted, encoding="utf-8")
        return 0
    if wanted != text:
        print(f"{path}: the metric table differs from vllm_logwatch/exporting/catalogue.py; run "
              f"python tools/metrics_table.py --write {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
