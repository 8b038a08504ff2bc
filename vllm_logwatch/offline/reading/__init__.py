"""Reading logs offline: inputs, the stream scanner, the range workers and their record form, container
logs, the general reader, and the records by launch."""
