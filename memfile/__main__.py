"""`python -m memfile`: the same as the `memfile` command."""

from .cli import main

main()
