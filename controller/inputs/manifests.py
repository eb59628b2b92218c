"""Reading Node, Workload and PriorityClass manifests from YAML files, with errors a user
can act on.

Accepts what a user would ``kubectl apply`` or get back from ``kubectl get -o yaml``:
multi-document YAML, and ``kind: List`` (or ``NodeList``/``WorkloadList``) with ``items``.
Every problem becomes one ``ManifestError`` line naming the file, the object and the field.
Files are read through ``controller.inputs.safeyaml``: at most 64 MiB, UTF-8, bounded depth
and alias expansion (see its docstring for the budgets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import API_VERSION, KIND, Workload
from controller.inputs import safeyaml
from controller.scheduler.nodes import NodeError, NodeInfo, node_info_from_node
from controller.scheduler.priority import API_GROUP as PRIORITY_CLASS_GROUP
from controller.scheduler.priority import KIND as PRIORITY_CLASS_KIND
from controller.scheduler.priority import (
    PriorityClass,
    PriorityClassError,
    PriorityClasses,
    priority_class_from_object,
)

MAX_SHOWN = 60


class ManifestError(ValueError):
    """Bad input: one line, naming the file, the object and the field."""


def read_yaml(path: Path) -> list[Any]:
    """Every document of the file, through the bounded loader; ``ManifestError`` otherwise."""
    try:
        with path.open("rb") as f:
            data = f.read(safeyaml.MAX_FILE_BYTES + 1)  # bounded even for /dev/zero or a pipe
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file") from None
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return safeyaml.load_all(data)
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        raise ManifestError(
            f"{path}: not UTF-8 text (byte 0x{byte:02x} at offset {exc.start})"
        ) from None
    except safeyaml.YAMLLimitError as exc:
        raise ManifestError(f"{path}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{path}:{where}: invalid YAML: {problem}") from None


@dataclass(frozen=True)
class ManifestFile:
    """A file's objects, read once: ``orca plan`` takes Nodes or Workloads and the
    PriorityClasses from the same file, and a 5,000-Node file costs seconds to parse."""

    path: Path
    objects: tuple[tuple[str, Mapping[str, Any]], ...]  # (where, object), List kinds flattened

    def priority_classes(self) -> ManifestFile:
        """Only the PriorityClasses: what is worth keeping once the rest has been read."""
        return ManifestFile(self.path, tuple(o for o in self.objects if is_priority_class(o[1])))


def read_manifests(path: Path) -> ManifestFile:
    """Every object in the file (through the bounded loader); ``ManifestError`` otherwise."""
    return ManifestFile(path, tuple(_read_documents(path)))


Source = Path | ManifestFile
"""A file to read, or one already read."""

BACKGROUND_MIN_BYTES = 1 << 20
"""Files this large are worth a process of their own (``read_in_background``)."""


#: How long ``PendingRead.cancel`` waits for the child to end on SIGTERM before SIGKILL.
CANCEL_GRACE = 1.0


class PendingRead:
    """``read_manifests(path)`` running in a forked child process while this one does
    something else (``orca plan`` reads the Workloads while it reads the Nodes: on two cores
    the shorter read costs no wall time). The child sends back the objects or the error's one
    line; ``result`` returns or raises exactly what ``read_manifests`` would have, when it is
    called, so errors come in the same order as reading one file after the other. A child that
    dies (killed, out of memory) is not an error: the file is then read here."""

    def __init__(self, path: Path, min_bytes: int = BACKGROUND_MIN_BYTES) -> None:
        self.path = path
        self._child: Any = None
        self._receiver: Any = None
        try:
            large = path.is_file() and path.stat().st_size >= min_bytes
        except OSError:
            large = False
        if large:
            self._start()

    def _start(self) -> None:
        import multiprocessing  # only when a file is large: ~20 ms of imports

        if "fork" not in multiprocessing.get_all_start_methods():
            return  # pragma: no cover - Linux and macOS have fork
        context = multiprocessing.get_context("fork")
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_read_and_send, args=(self.path, sender), daemon=True)
        try:
            child.start()
        except OSError:  # pragma: no cover - no process to spare: read it here, later
            receiver.close()
            return
        finally:
            sender.close()
        self._child, self._receiver = child, receiver

    @property
    def in_background(self) -> bool:
        return self._child is not None

    def result(self) -> ManifestFile:
        if self._child is None:
            return read_manifests(self.path)
        try:
            status, payload = self._receiver.recv()
        except (EOFError, OSError):
            status, payload = "lost", None
        finally:
            self.cancel()
        if status == "ok":
            return ManifestFile(self.path, payload)
        if status == "error":
            raise ManifestError(payload)
        return read_manifests(self.path)

    def cancel(self) -> None:
        """Stop the child (if still reading) and release it; idempotent. SIGTERM first, then
        SIGKILL after ``CANCEL_GRACE`` seconds: a forked child inherits its parent's Python
        signal handlers, and one that catches SIGTERM, in a child stuck on a lock another
        thread of the parent held at the fork, never ends (a test run hung here 600 s)."""
        if self._child is not None:
            self._receiver.close()
            if self._child.is_alive():
                self._child.terminate()
                self._child.join(CANCEL_GRACE)
                if self._child.is_alive():
                    self._child.kill()
            self._child.join()
            self._child = self._receiver = None


def _read_and_send(path: Path, sender: Any) -> None:
    """The child's side of ``PendingRead``."""
    try:
        message: tuple[str, Any] = ("ok", read_manifests(path).objects)
    except ManifestError as exc:
        message = ("error", str(exc))
    except Exception:  # a bug, not bad input: the parent reads the file and reports it
        message = ("lost", None)
    sender.send(message)
    sender.close()


def _documents(source: Source) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if isinstance(source, ManifestFile):
        return iter(source.objects)
    return _read_documents(source)


def _read_documents(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, object) for every object in the file, flattening List kinds."""
    for number, doc in enumerate(read_yaml(path), start=1):
        if doc is None:
            continue
        where = f"{path}: document {number}"
        if not isinstance(doc, Mapping):
            raise ManifestError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ManifestError(f"{where}: items: expected a list")
            for i, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise ManifestError(f"{where}: items[{i}]: expected a Kubernetes object")
                yield f"{where} items[{i}]", item
        else:
            yield where, doc


def _shown(value: object) -> str:
    """A user's value in a message: a short string as is, anything else by its type."""
    if isinstance(value, str) and value.isprintable() and len(value) <= MAX_SHOWN:
        return value
    if isinstance(value, str):
        return repr(value[:MAX_SHOWN] + ("..." if len(value) > MAX_SHOWN else ""))
    return f"({type(value).__name__})"


def _describe(obj: Mapping[str, Any]) -> str:
    kind = _shown(obj.get("kind", "object"))
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or not metadata.get("name"):
        return f"{kind} (no metadata.name)"
    namespace = metadata.get("namespace")
    name = _shown(metadata["name"])
    return f"{kind} {_shown(namespace)}/{name}" if namespace else f"{kind} {name}"


def load_nodes(source: Source) -> list[NodeInfo]:
    """Every Node in the file as a NodeInfo; a name given twice is an error naming both."""
    path = source.path if isinstance(source, ManifestFile) else source
    nodes: list[NodeInfo] = []
    seen: dict[str, str] = {}
    for where, obj in _documents(source):
        if is_priority_class(obj):
            continue  # read by load_priority_classes: either file may hold them
        if obj.get("kind") != "Node":
            raise ManifestError(f"{where}: {_describe(obj)} is not a Node")
        try:
            info = node_info_from_node(obj)
        except NodeError as exc:
            raise ManifestError(f"{where}: {_describe(obj)}: {exc}") from None
        if info.hostname in seen:
            raise ManifestError(
                f"{where}: Node {info.hostname} appears twice (first in {seen[info.hostname]})"
            )
        seen[info.hostname] = where.removeprefix(f"{path}: ")
        nodes.append(info)
    return nodes


def parse_workload(obj: Mapping[str, Any], where: str) -> Workload:
    """One Workload object, refused as the CRD schema would refuse it."""
    if obj.get("kind") != KIND or obj.get("apiVersion") != API_VERSION:
        raise ManifestError(
            f"{where}: {_describe(obj)} ({_shown(obj.get('apiVersion'))}) "
            f"is not a {API_VERSION} {KIND}"
        )
    try:
        return Workload.model_validate(obj)
    except ValidationError as exc:
        raise ManifestError(f"{where}: {_describe(obj)}: {validation_message(exc)}") from None


def load_workloads(
    source: Source, check: Callable[[Workload], Sequence[str]] | None = None
) -> list[Workload]:
    """Every Workload in the file, in file order; a name given twice is an error, and so is
    the first of ``check``'s errors (``orca plan`` passes ``Scheduler.spec_errors``: CEL the
    operator would mark ``Invalid`` is bad input offline)."""
    workloads: list[Workload] = []
    seen: set[str] = set()
    for where, obj in _documents(source):
        if is_priority_class(obj):
            continue
        workload = parse_workload(obj, where)
        if check is not None and (errors := check(workload)):
            raise ManifestError(f"{where}: Workload {workload.key}: {errors[0]}")
        if workload.key in seen:
            raise ManifestError(f"{where}: Workload {workload.key} appears twice")
        seen.add(workload.key)
        workloads.append(workload)
    return workloads


def is_priority_class(obj: Mapping[str, Any]) -> bool:
    """A ``scheduling.k8s.io`` PriorityClass document (``orca plan`` reads them from either
    file, as ``kubectl get priorityclasses -o yaml`` prints them)."""
    version = obj.get("apiVersion")
    return (
        obj.get("kind") == PRIORITY_CLASS_KIND
        and isinstance(version, str)
        and version.startswith(f"{PRIORITY_CLASS_GROUP}/")
    )


def load_priority_classes(*sources: Source) -> PriorityClasses:
    """Every PriorityClass in the files; a bad one or a name given twice is an error."""
    found: dict[str, tuple[PriorityClass, str]] = {}
    for source in sources:
        for where, obj in _documents(source):
            if not is_priority_class(obj):
                continue
            try:
                parsed = priority_class_from_object(obj)
            except PriorityClassError as exc:
                raise ManifestError(f"{where}: {exc}") from None
            if parsed.name in found:
                raise ManifestError(
                    f"{where}: PriorityClass {parsed.name} appears twice "
                    f"(first in {found[parsed.name][1]})"
                )
            found[parsed.name] = (parsed, where)
    return PriorityClasses.of(c for c, _ in found.values())
