"""`python -m checker.cli ...` is `kvmc ...`."""

import sys

from checker.cli import main

sys.exit(main())
