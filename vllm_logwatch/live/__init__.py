"""The worker threads that carry lines from a source (a followed file, vLLM's stdout) through the
parser into the exporter.
"""
