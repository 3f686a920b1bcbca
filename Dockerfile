# fabriccap operator image.
#
#   docker build -t ghcr.io/fabriccap/fabriccap:0.1.0 .
#
# The runtime dependencies come from requirements.txt, pinned, the same file CI installs
# (scripts/bootstrap.sh); the package itself is installed with --no-deps so nothing unpinned
# slips in. tests/repo/test_packaging.py checks these properties; tests/image/test_image.py
# checks the image itself (scripts/build-image.sh, `make image`, builds it without Docker).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
# Unset unless given (--build-arg SOURCE_DATE_EPOCH=…, as scripts/build-image.sh does): then
# pip and compileall write hash-based .pyc, which stay valid whatever the files' mtimes, so a
# build that clamps timestamps is bit-reproducible and its bytecode is not stale.
ARG SOURCE_DATE_EPOCH
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/fabriccap
ENV PATH=/opt/fabriccap/bin:$PATH
WORKDIR /src
# Dependencies first: this layer stays cached while only the code changes. Every pinned
# dependency has a wheel for CPython 3.11 on manylinux, so no compiler is needed. --no-deps
# plus `pip check`: requirements.txt must pin the whole closure, or the build fails here
# instead of resolving an unpinned version.
# The build backend too, from requirements-build.txt (pinned, hash-checked): the product is
# built with it and no isolated build env, whose setuptools would be PyPI's newest of the day,
# recorded in the wheel's metadata and so in the image's digest.
COPY requirements.txt requirements-build.txt ./
RUN pip install --no-deps --only-binary=:all: -r requirements.txt \
    && pip install --no-deps --only-binary=:all: --require-hashes -r requirements-build.txt \
    && pip check
# build_backend.py (named by pyproject.toml) builds the product alone: operator/fabriccap_devtools,
# the test bench, stays out of the wheel and so out of the image (tests/image checks it).
# LICENSE lands in the package's .dist-info/licenses/ (pyproject.toml's license-files).
COPY pyproject.toml setup.py build_backend.py README.md LICENSE ./
COPY operator/ ./operator/
RUN pip install --no-deps --no-build-isolation --check-build-dependencies . \
    && pip check \
    && python -m compileall -q /opt/fabriccap/lib \
    && pip uninstall --yes pip setuptools \
    && fabriccap --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="fabriccap" \
      org.opencontainers.image.description="Per node pool: do the nodes really advertise the fabric resource (AWS EFA, AKS RDMA), uniformly?" \
      org.opencontainers.image.source="https://github.com/fabriccap/fabriccap" \
      org.opencontainers.image.licenses="Apache-2.0"
# The wheels Debian's python3-venv keeps for ensurepip (pip, setuptools): with them
# `python -m venv` in a container would install pip. Absent from python:*-slim, which ships
# pip itself. (A whiteout: the bytes stay in the base's layer, unreachable in a container.)
RUN rm -rf /usr/share/python-wheels
# The venv holds the dependencies and the fabriccap package; nothing else is added to the
# base image (no compiler, no pip cache, no build tree).
COPY --from=builder /opt/fabriccap /opt/fabriccap
ENV PATH=/opt/fabriccap/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# Numeric, so the kubelet can verify runAsNonRoot without an /etc/passwd entry.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["fabriccap"]
CMD ["run", "--standalone"]
