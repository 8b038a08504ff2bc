"""The offline commands' machinery: inputs, the bulk scanner, writers, summaries, plots, backfill."""
