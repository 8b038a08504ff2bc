"""`logwatch audit`: benchmark result files read (results.py, every format), their windows found in the
server's log (windows.py), what the server really ran in each (measures.py), verdicts (verdicts.py), the
output (tables.py, figure.py)."""
