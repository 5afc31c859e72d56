"""`python -m lab up|down|status|scheduler|kubeconfig|build|demo` (what scripts/lab runs)."""

import sys

from lab.cli import main

sys.exit(main())
