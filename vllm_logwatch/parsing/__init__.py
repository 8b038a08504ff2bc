"""Reading vLLM's lines: `parse_line(str) -> Event | None`, the events, year-less stamps, and the
assembly of events into records. Pure: no I/O.
"""
