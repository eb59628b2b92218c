"""The kubernetes client's quantity parser, without importing the kubernetes client.

``kubernetes.utils.quantity`` is a small module of its own (it needs only ``decimal``), but
importing it the usual way first runs ``kubernetes/__init__.py``, which loads the whole client,
its configuration loaders, urllib3 and requests: ~0.3-0.4 s of start-up that ``orca plan``
(which parses quantities and nothing else of the client) would pay on every run. So the one
source file is loaded by its path from the installed package, as the importlib documentation's
"importing a source file directly" recipe does: the same code, the same results, none of the
rest. When the client is already imported (the operator), or the file cannot be found there,
the usual import is used.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import cast

_MODULE = "kubernetes.utils.quantity"


def _load() -> ModuleType:
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    package = importlib.util.find_spec("kubernetes")  # finds, does not run, the package
    for location in (package.submodule_search_locations or []) if package else []:
        path = Path(location) / "utils" / "quantity.py"
        spec = importlib.util.spec_from_file_location("controller.api._k8s_quantity", path)
        if spec is None or spec.loader is None or not path.is_file():
            continue
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    import kubernetes.utils.quantity  # pragma: no cover - an unusual install: the slow way

    return kubernetes.utils.quantity  # pragma: no cover


parse_quantity = cast(Callable[[object], Decimal], _load().parse_quantity)
"""``kubernetes.utils.quantity.parse_quantity``: a quantity string or number as a Decimal;
``ValueError`` for what is not one."""
