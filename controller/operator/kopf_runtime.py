"""kopf, imported without the kubernetes client's models.

kopf recognises the kubernetes client's objects when that library is installed, and to do so
imports ``kubernetes.client`` as it loads (``kopf._cogs.helpers.thirdparty``), which imports
every generated API model: 9 MB of the operator's resident memory after its imports. orca
hands kopf plain dicts only, and the deployed operator reads its Pod's credentials without the
client (``kube.credentials.InClusterConfiguration``), so nothing else imports it there. Loaded here
with ``kubernetes`` hidden, kopf takes the path it takes when the library is not installed
(its optional imports fail, its isinstance checks match nothing); the library is importable
again as soon as kopf is loaded, for the kubeconfig loader. Every module imports kopf from
here, so whichever comes first hides it.
"""

from __future__ import annotations

import sys

_hidden = "kubernetes" not in sys.modules
if _hidden:
    sys.modules["kubernetes"] = None  # type: ignore[assignment]  # "import kubernetes" fails
try:
    import kopf
finally:
    if _hidden and "kubernetes" in sys.modules and sys.modules["kubernetes"] is None:
        del sys.modules["kubernetes"]

__all__ = ["kopf"]
