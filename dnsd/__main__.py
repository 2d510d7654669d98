from dnsd.cli import main

raise SystemExit(main())
