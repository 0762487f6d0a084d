"""`python -m strata.cli`: the `strata` command without its installed script."""

import sys

from strata.cli.main import main

sys.exit(main())
