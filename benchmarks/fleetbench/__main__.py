from fleetbench.cli.main import main

raise SystemExit(main())
