"""The ``ketch`` command line (``clients.cli._main``) and the local-cluster launcher."""
from clients.cli._main import main

__all__ = ["main"]
