"""The offline commands' machinery: reading/ (inputs, the scanners, the general reader),
output/ (CSV, JSON lines, OpenMetrics), summary/, compare/, plot/."""
