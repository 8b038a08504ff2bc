"""`logwatch summary`: the launches' totals, the tables by concurrency, the launch facts and the context x
concurrency matrix."""
