"""Following log files, folders and globs the way `tail -F` should; the state file; wakers."""
