"""`tfcheck bench`: each backend timed in its own child process, in turns."""
