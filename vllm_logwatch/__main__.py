"""`python -m vllm_logwatch` is `logwatch`."""

import sys

from .cli import main

sys.exit(main())
