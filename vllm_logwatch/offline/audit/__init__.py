"""`logwatch audit`: benchmark result files read (results.py, every format), their windows found in the
server's log, what the server really ran in each and the verdicts (measures.py), the tables and the
figure (tables.py)."""
