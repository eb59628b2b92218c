"""Whether a Workload may be stored: the rules that make it ``Invalid``, asked before it is.

One rule set, two callers. The admission webhook (``controller.operator.webhook``) asks
``refusal`` for every Workload created or updated, so ``kubectl apply``, ``--dry-run=server``
and GitOps tools hear of a mistake before anything is stored; the operator reaches the same
answer through the same steps when it decides a stored Workload (``ClusterState`` parses the
object with the same model and message, ``Scheduler.schedule`` runs the same pre-filters and
PriorityClass resolution), and writes ``phase: Invalid`` with the same message: the backstop
for an object stored while the webhook was not answering.

What the CRD's schema refuses (enums, bounds, lengths, ``count`` only on a Service) never
reaches the webhook: the API server checks the schema first. What is left is what only orca
knows: CEL that does not compile, is ill-typed or over its cost budget, an unknown runtime
alias, a PriorityClass that does not exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import Workload
from controller.scheduler.decision import invalid_message
from controller.scheduler.priority import PriorityClasses
from controller.scheduler.scheduler import Scheduler


def refusal(
    body: Mapping[str, Any], scheduler: Scheduler, classes: PriorityClasses | None
) -> str | None:
    """The one line ``body`` (a Workload object) would be ``Invalid`` with, naming the field;
    None when it is valid. ``classes`` None: the PriorityClasses are not known yet (the
    operator's informer has not listed them), so a missing one is left to the backstop."""
    try:
        workload = Workload.model_validate(body)
    except ValidationError as exc:
        return validation_message(exc)
    errors = scheduler.invalid_because(workload, classes)
    return invalid_message(errors) if errors else None
