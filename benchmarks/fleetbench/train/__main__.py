"""`python -m fleetbench.train ARGS` is `fleetbench train ARGS`; torchrun starts each rank this way."""

from fleetbench.cli.train_cmd import main

raise SystemExit(main())
