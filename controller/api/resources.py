"""Resource names and amounts, as Kubernetes defines them for a container's requests.

A Workload asks, per replica, for any resource a Node advertises in ``status.allocatable``:
``cpu``, ``memory``, ``ephemeral-storage``, ``hugepages-<size>`` and extended resources
(``nvidia.com/gpu``, ``example.com/foo``: a domain-prefixed name outside ``kubernetes.io``).
The names are checked as the API server checks a container's (``validateContainerResourceName``
and ``ValidateResourceQuantityValue``, pkg/apis/core/validation/validation.go; the helpers
``IsExtendedResourceName``, ``IsHugePageResourceName``, ``IsIntegerResourceName`` of
pkg/apis/core/helper/helpers.go), with two differences, both stricter: a name in the
``kubernetes.io`` domain (kube lets a container name one, and nothing then offers it) and
``pods`` (every replica counts one Pod already) are refused.

Amounts are integers: cpu in millicores, every other resource in its unit (bytes for
``memory``, ``ephemeral-storage`` and huge pages, a count for an extended resource), rounded
up, at most ``MAX_SCALED_QUANTITY`` (2^53, so every sum the scheduler makes stays exact).
Everything but cpu and memory is a *scalar* resource here: the same path for each
(kube's ``framework.Resource`` keeps ephemeral storage beside cpu and memory and the rest in
``ScalarResources``; orca keeps cpu and memory apart only because CEL and the scores read
them by name).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Final

from controller.api.quantity import parse_quantity

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
HUGEPAGES_PREFIX: Final = "hugepages-"
#: kube's ``ResourceDefaultNamespacePrefix``: names in this domain are Kubernetes' own.
NATIVE_DOMAIN: Final = "kubernetes.io/"
#: kube's ``DefaultResourceRequestsPrefix`` (quota's ``requests.<name>``).
REQUESTS_PREFIX: Final = "requests."

#: The most resources one Workload may ask for. kube sets no bound; a Node rarely offers
#: more than a dozen, and each name asked is a column the scheduler checks per replica.
MAX_RESOURCES: Final = 16
#: The most resources orca reads of one Node's ``status.allocatable``; a Node that advertises
#: more is refused (it takes nothing), as any Node orca cannot represent.
MAX_NODE_RESOURCES: Final = 64
#: 253 less ``requests.``: kube's quota name for an extended resource (``requests.<name>``)
#: must still be a qualified name. One bound on the whole name, the same in the CRD's rule.
MAX_RESOURCE_NAME_LENGTH: Final = 244
#: ``hugepages-<size>``, the size a whole quantity such as 2Mi or 1Gi (kube parses it as any
#: quantity, ``HugePageSizeFromResourceName``; a page is a whole, positive number of bytes).
HUGEPAGES_PATTERN: Final = r"^hugepages-[1-9][0-9]*([KMGTPE]i|[kMGTPE])?$"
_HUGEPAGES = re.compile(HUGEPAGES_PATTERN)

#: Per replica, the amounts of the resources other than cpu and memory, sorted by name, none
#: zero: what a Workload asks and a booking holds beside cpu and memory.
Scalars = tuple[tuple[str, int], ...]

#: What the API server says of any name it refuses (the CRD's rule), and orca of most.
RESOURCE_NAME_MESSAGE: Final = (
    "is not a resource a replica can ask for: cpu, memory, ephemeral-storage, "
    "hugepages-<size>, or an extended resource with a domain (e.g. nvidia.com/gpu)"
)

_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def qualified_name_problem(value: str) -> str | None:
    """Why ``value`` is not a qualified name (apimachinery's ``IsQualifiedName``: an optional
    DNS-1123 subdomain prefix of at most 253 characters and ``/``, then a name of at most 63
    letters, digits, ``-``, ``_`` or ``.`` that starts and ends with a letter or digit), or
    None."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "has a prefix that is not a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            "must be a name of at most 63 letters, digits, '-', '_' or '.' that starts and "
            "ends with a letter or digit, optionally after a DNS subdomain and '/'"
        )
    return None


def is_extended(name: str) -> bool:
    """kube's ``IsExtendedResourceName``: outside the ``kubernetes.io`` domain, with a domain
    (a name without ``/`` is native), not ``requests.``-prefixed, and a qualified name once
    prefixed with ``requests.``."""
    return (
        "/" in name
        and NATIVE_DOMAIN not in name
        and not name.startswith(REQUESTS_PREFIX)
        and qualified_name_problem(REQUESTS_PREFIX + name) is None
    )


def is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


@functools.lru_cache(maxsize=256)
def hugepage_size(name: str) -> int | None:
    """The page size of ``hugepages-<size>`` in bytes (kube's ``HugePageSizeFromResourceName``
    parses the size as a quantity), None when it is not ``HUGEPAGES_PATTERN``."""
    if not _HUGEPAGES.fullmatch(name):
        return None
    try:
        size = parse_quantity(name.removeprefix(HUGEPAGES_PREFIX))
    except ValueError:
        return None
    if size <= 0 or size != size.to_integral_value():
        return None
    return int(size)


@functools.lru_cache(maxsize=1024)
def name_problem(name: str) -> str | None:
    """Why ``name`` is not a resource a Workload may ask for, or None: one message for every
    refusal, the one the API server gives (the CRD's rule says the same), so ``orca plan``,
    the webhook and ``kubectl apply`` agree word for word. ``pods`` is refused (every replica
    counts one Pod already), and so is the ``kubernetes.io`` domain (nothing offers an
    extended resource there), where kube would take both on a container."""
    if len(name) > MAX_RESOURCE_NAME_LENGTH or qualified_name_problem(name) is not None:
        return RESOURCE_NAME_MESSAGE
    if "/" not in name:
        if name in (CPU, MEMORY, EPHEMERAL_STORAGE) or hugepage_size(name) is not None:
            return None
        return RESOURCE_NAME_MESSAGE
    return None if is_extended(name) else RESOURCE_NAME_MESSAGE


def scale_of(name: str) -> int:
    """What an amount of ``name`` is multiplied by to be an integer: 1000 for cpu
    (millicores), 1 for everything else."""
    return 1000 if name == CPU else 1


def unit_of(name: str) -> str:
    """What an amount of ``name`` counts, for messages."""
    if name == CPU:
        return "millicores"
    return "units" if is_extended(name) else "bytes"


def whole_number_problem(name: str, value: Decimal) -> str | None:
    """Why ``value`` is not an amount of ``name`` the API server accepts beyond being a
    quantity: an extended resource is a whole number (``ValidateResourceQuantityValue``:
    ``IsIntegerResourceName``, "must be an integer"), huge pages a whole number of pages
    (``IsHugePageResourceValueDivisible``)."""
    if is_extended(name) and value != value.to_integral_value():
        return "must be a whole number: an extended resource is counted in units"
    if is_hugepages(name):
        size = hugepage_size(name)
        if size is not None and value % size != 0:
            return f"must be a multiple of the page size, {size} bytes"
    return None
