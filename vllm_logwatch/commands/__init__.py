"""One module per command (`run_*`), wiring sources, the core and sinks; `cli.py` imports them lazily."""
