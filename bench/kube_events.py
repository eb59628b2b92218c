"""The ``Scheduled`` Event kube-scheduler posts for a Pod it bound, byte for byte as its client
sends it: an ``events.k8s.io/v1`` Event in Kubernetes' protobuf envelope
(``application/vnd.kubernetes.protobuf``, the content type of kube-scheduler's clientset).

Built here by hand (a few fields of three messages), so the benchmarks can post what
kube-scheduler posts without Go: ``schedule_one.go`` records ``Eventf(pod, nil, Normal,
"Scheduled", "Binding", "Successfully assigned NS/NAME to NODE")`` through client-go's
``tools/events`` recorder (``makeEvent``: a name ``<pod>.<unix nanoseconds in hex>``, the
event time, reportingController and reportingInstance, ``regarding`` the Pod). The messages
and field numbers are those of ``k8s.io/api/events/v1/generated.proto``,
``k8s.io/api/core/v1/generated.proto`` (ObjectReference) and
``k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`` (ObjectMeta, MicroTime); the envelope
is ``k8s\\x00`` then a ``runtime.Unknown`` (``pkg/runtime/serializer/protobuf/protobuf.go``).
"""

from __future__ import annotations

import time

PROTOBUF = "application/vnd.kubernetes.protobuf"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/{ns}/events"
_MAGIC = b"k8s\x00"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(field: int, value: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings and embedded messages."""
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _string(field: int, value: str) -> bytes:
    return _bytes(field, value.encode()) if value else b""


def _int(field: int, value: int) -> bytes:
    """A varint field (wire type 0)."""
    return _varint(field << 3) + _varint(value) if value else b""


def scheduled_event(
    pod: str, namespace: str, uid: str, version: str, node: str, now: float | None = None
) -> bytes:
    """The body kube-scheduler's client posts to ``EVENTS_V1`` for ``pod`` bound to ``node``."""
    now = time.time() if now is None else now
    nanos = int(now * 1e9)
    metadata = _string(1, f"{pod}.{nanos:x}") + _string(3, namespace)
    event_time = _int(1, nanos // 1_000_000_000) + _int(2, nanos % 1_000_000_000 // 1000 * 1000)
    regarding = (
        _string(1, "Pod")
        + _string(2, namespace)
        + _string(3, pod)
        + _string(4, uid)
        + _string(5, "v1")
        + _string(6, version)
    )
    event = (
        _bytes(1, metadata)
        + _bytes(2, event_time)
        + _string(4, "default-scheduler")
        + _string(5, "default-scheduler-bench")
        + _string(6, "Binding")
        + _string(7, "Scheduled")
        + _bytes(8, regarding)
        + _string(10, f"Successfully assigned {namespace}/{pod} to {node}")
        + _string(11, "Normal")
    )
    type_meta = _string(1, "events.k8s.io/v1") + _string(2, "Event")
    return _MAGIC + _bytes(1, type_meta) + _bytes(2, event)
