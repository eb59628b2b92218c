# The operator image: `orca run` and nothing for development (no `orca dev-cluster`, no
# cryptography, no compilers, and no pip, setuptools or wheel anywhere in the runtime image).
#
#   docker build -t orca-controller:0.1.0 .
#
# Every Python package comes from a lock with hashes (`requirements.lock` for what runs,
# `requirements-build.lock` for the build backend that turns orca itself into a wheel); `make
# requirements.lock` regenerates both from pyproject.toml. The base image is pinned by version;
# pin it by digest too when you publish (`python:3.11.14-slim-bookworm@sha256:...`).
# No container engine runs on the development machines: tests/packaging checks what can be
# checked without one (see README, "The image").

# -- build: a virtualenv at /opt/orca with the locked dependencies and orca's own wheel --------
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1
WORKDIR /src
COPY requirements.lock requirements-build.lock ./
# The build backend in its own venv; the runtime venv gets no pip at all.
RUN python -m venv /opt/build \
    && /opt/build/bin/pip install --require-hashes --no-deps --only-binary=:all: \
        -r requirements-build.lock \
    && python -m venv --without-pip /opt/orca \
    && /opt/build/bin/pip --python /opt/orca/bin/python install --require-hashes --no-deps \
        --only-binary=:all: -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY controller ./controller
# CEL's parser, analysed once here (0.3 s) rather than at every start of the pod, which has no
# writable home to cache it in: /opt/orca/share/orca, root's, read-only to the runtime user.
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
    && /opt/build/bin/pip --python /opt/orca/bin/python install --no-deps --no-index \
        /wheels/orca_controller-*.whl \
    && /opt/orca/bin/python -m controller.scheduler.celcache

# -- runtime: the interpreter, the venv, an unprivileged user ------------------------------
FROM python:3.11.14-slim-bookworm
# The base image installs pip (ensurepip), setuptools and wheel into /usr/local for building;
# nothing here builds or installs at run time. pip removes the three by their own records of
# their files (itself last: its scripts and the image's pip -> pip3 link go too), and the
# wheels ensurepip would reinstall pip from go with them.
RUN python -m pip uninstall --yes --no-input --disable-pip-version-check \
        --root-user-action=ignore setuptools wheel pip \
    && rm -rf /usr/local/lib/python3.*/ensurepip/_bundled
LABEL org.opencontainers.image.title="orca-controller" \
      org.opencontainers.image.description="Runtime-aware workload placement controller for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --gid 10001 orca \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin orca
COPY --from=build /opt/orca /opt/orca
# orca's licence where images keep theirs (make image puts it there too; the wheel's
# .dist-info/licenses has it as well).
COPY --from=build /src/LICENSE /licenses/LICENSE
ENV PATH=/opt/orca/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080 9090
# The liveness endpoint `orca run` serves by default (Kubernetes uses the Deployment's probes).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD ["/opt/orca/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["/opt/orca/bin/orca"]
CMD ["run", "--log-format=json"]
