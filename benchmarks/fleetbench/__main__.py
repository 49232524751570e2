"""`python -m fleetbench`: the `fleetbench` command, the way torchrun starts each rank."""

from fleetbench.cli.main import main

raise SystemExit(main())
