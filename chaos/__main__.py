"""``python -m chaos run ...``: see chaos.runner."""
import sys

from chaos.runner import main

sys.exit(main())
