"""`python -m app.cli …`: the `pairbot` console script without its installed wrapper."""

from app.cli.entry import main

main()
