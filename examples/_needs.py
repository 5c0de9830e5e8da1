"""What an example needs, checked before it starts: a missing package is
one line naming what to install, not a traceback minutes in."""
from __future__ import annotations

import importlib
import sys

INSTALL = {
    "torch": "pip install torch (or Debian's python3-torch; make venv uses that)",
    "augloader": "pip install clients/python, or run from the checkout with PYTHONPATH=clients/python",
    "sklearn": "pip install scikit-learn",
    "torch_geometric": "pip install torch_geometric",
    "ogb": "pip install ogb",
    "rdkit": "pip install rdkit",
    "numpy": "pip install numpy",
}


def need(script: str, *modules: str) -> None:
    """Exits with status 1 naming every module of modules that does not
    import, and how to install it."""
    missing = []
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        sys.exit(f"{script} needs " + "; ".join(f"{m} ({INSTALL.get(m, 'pip install ' + m)})" for m in missing))
