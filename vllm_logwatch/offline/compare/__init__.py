"""`logwatch compare`: launches side by side, as tables and a figure."""
