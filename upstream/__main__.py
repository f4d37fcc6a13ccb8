"""`python -m upstream sglang install ...` / `python -m upstream conform ...` (same as `kvmc ...`)."""

import sys

from .cli import main

sys.exit(main())
