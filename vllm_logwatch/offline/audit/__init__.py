"""`logwatch audit`: benchmark result files read (results.py, every format), their windows found in the
server's log, what the server really ran in each, the verdicts, the tables and the figure (measures.py)."""
