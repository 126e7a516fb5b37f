"""`python -m runtime_ops.cli`."""

from runtime_ops.cli import main

raise SystemExit(main())
