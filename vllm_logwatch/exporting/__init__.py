"""The live exporter: per-engine state from events, the metric catalogue, a collector read at scrape
time.
"""
