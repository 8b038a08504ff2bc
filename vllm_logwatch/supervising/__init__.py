"""Run mode: vLLM as a child process, its output teed, stopped well."""
