"""What `logwatch parse` writes: CSV, JSON lines, and OpenMetrics for backfill."""
