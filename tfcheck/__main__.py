"""`python -m tfcheck` is the `tfcheck` command."""

from tfcheck.cli import main

main()
