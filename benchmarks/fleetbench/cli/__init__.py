"""The `fleetbench` command line: `main.py` builds the parser, each `*_cmd.py` one command group."""
