"""Where kube-apiserver's CPU goes: a CPU profile from its ``/debug/pprof/profile`` (served by
default, ``--profiling``), saved beside the bench's figures and read with ``go tool pprof``.

``capture`` fetches a profile of ``seconds`` while the caller's requests run (the endpoint
samples for that long, then answers). ``breakdown`` reads every sampled stack
(``go tool pprof -traces``) and puts each sample in the first category of ``CATEGORIES``
that one of its frames matches, so the categories add up to the whole profile: what a status
write costs in managed fields, validation, JSON, etcd, the watch cache... ``top`` is
``go tool pprof -top`` for the functions themselves. The categories are ordered from the
most specific to the most general: a sample in the field manager that decodes JSON is the
field manager's.

    go tool pprof -top  ~/.cache/orca-testcp/*/bin/kube-apiserver DIR/status-write.pprof
    go tool pprof -list 'structuredMergeManager..Update' BINARY DIR/status-write.pprof
"""

from __future__ import annotations

import re
import shutil
import ssl
import subprocess
from collections import defaultdict
from pathlib import Path

import aiohttp

from controller.operator.kube.client import authorization
from controller.operator.kube.credentials import ClientConfiguration

#: (category, a regular expression over the frames' function names), first match wins.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("managedFields (field manager)", r"managedfields|fieldmanager|structured-merge-diff"),
    (
        "validation (schema, CEL, strategy)",
        r"apiextensions-apiserver/pkg/apiserver/(schema/cel|validation)|kube-openapi/pkg/validation"
        r"|k8s.io/apiserver/pkg/cel|cel-go|Strategy\)?\.Validate|pkg/apis/core/validation"
        r"|ValidateObjectMeta|apimachinery/pkg/api/validation",
    ),
    ("admission", r"k8s.io/apiserver/pkg/admission|plugin/pkg/admission"),
    (
        "watch cache (each write read back from etcd's watch, kept, sent to watchers)",
        r"etcd3\.\(\*watchChan\)|etcd3\.decodeObj|cacher\.\(\*Cacher\)\.(dispatch|process"
        r"|startDispatch)|cacher\.\(\*watchCache\)|cacheWatcher|cacher\.\(\*Cacher\)\.Watch",
    ),
    (
        "merge patch (the live object as JSON, merged, decoded, pruned, defaulted)",
        r"applyPatchToCurrentObject|\(\*patcher\)\.applyPatch|jsonpatch|MergePatch",
    ),
    (
        "encode the answer",
        r"responsewriters|transformResponseObject|WriteObjectNegotiated|SerializeObject",
    ),
    (
        "storage (decode the live object, encode it for etcd, the etcd call)",
        r"etcd3\.\(\*store\)|etcd3\.\(\*defaultDecoder\)|go.etcd.io/etcd/client"
        r"|google.golang.org/grpc",
    ),
    (
        "decode the request body",
        r"createHandler|limitedReadBody|runtime\.Decode|serializer/json|sigs.k8s.io/json|protobuf",
    ),
    ("deep copy", r"DeepCopy|deepCopyJSON"),
    (
        "the handler chain (authn, authz, audit, APF, tracing)",
        r"authentication|authorization|endpoints/filters|server/filters|audit|flowcontrol|otelhttp",
    ),
    ("TLS, HTTP/2", r"crypto/|golang.org/x/net/http2|net/http"),
    ("garbage collector", r"runtime\.gcBgMarkWorker|runtime\.gcDrain|runtime\.bgsweep"),
)
OTHER = "other"


async def capture(configuration: ClientConfiguration, seconds: int, path: Path) -> Path:
    """A CPU profile of ``seconds`` of the API server of ``configuration``, saved to ``path``."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    headers = {}
    token = authorization(configuration)
    if token:
        headers["Authorization"] = token
    url = f"{configuration.host}/debug/pprof/profile?seconds={seconds}"
    timeout = aiohttp.ClientTimeout(total=seconds + 60)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(url, headers=headers, timeout=timeout) as response,
    ):
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"GET /debug/pprof/profile: {response.status} {body[:200]!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise SystemExit("reading a profile needs the Go toolchain (go tool pprof) on PATH")
    return go


def traces(binary: Path, profile: Path) -> list[tuple[float, list[str]]]:
    """Every sampled stack of ``profile``: (CPU seconds, functions from the leaf up)."""
    out = subprocess.run(
        [_go(), "tool", "pprof", "-traces", str(binary), str(profile)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    stacks: list[tuple[float, list[str]]] = []
    for block in re.split(r"^-+\+-+$", out, flags=re.MULTILINE)[1:]:
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        first = lines[0].split()
        if len(first) < 2:
            continue
        value = _seconds(first[0])
        if value is None:
            continue
        frames = [first[1], *(line.strip().split()[0] for line in lines[1:])]
        stacks.append((value, frames))
    return stacks


def _seconds(text: str) -> float | None:
    """``10ms``, ``1.50s``, ``250us`` as seconds (None: not a duration: a header line)."""
    found = re.fullmatch(r"([0-9.]+)(ns|us|ms|s|m|h)", text)
    if found is None:
        return None
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return float(found.group(1)) * scale[found.group(2)]


def breakdown(binary: Path, profile: Path) -> tuple[float, dict[str, float]]:
    """The profile's sampled CPU seconds and each category's seconds (``CATEGORIES``)."""
    compiled = [(name, re.compile(pattern)) for name, pattern in CATEGORIES]
    seconds: defaultdict[str, float] = defaultdict(float)
    total = 0.0
    for value, frames in traces(binary, profile):
        total += value
        joined = "\n".join(frames)
        category = next((name for name, pattern in compiled if pattern.search(joined)), OTHER)
        seconds[category] += value
    return total, {name: seconds[name] for name, _ in (*CATEGORIES, (OTHER, ""))}


def top(binary: Path, profile: Path, count: int = 25, cumulative: bool = False) -> str:
    """``go tool pprof -top`` (``-cum``: by the time spent in a function and what it calls)."""
    args = [_go(), "tool", "pprof", "-top", f"-nodecount={count}"]
    args += ["-cum"] if cumulative else []
    return subprocess.run(
        [*args, str(binary), str(profile)], check=True, capture_output=True, text=True
    ).stdout
