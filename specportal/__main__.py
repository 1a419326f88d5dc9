from specportal.cli import main

raise SystemExit(main())
