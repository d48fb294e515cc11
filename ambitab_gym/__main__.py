"""``python -m ambitab_gym`` runs the command line."""

from __future__ import annotations

import sys

from ambitab_gym.cli import main

sys.exit(main())
