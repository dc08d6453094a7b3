# syntax=docker/dockerfile:1
# One image for the three roles; the Deployment, the injected sidecar and the analyzer Job pick the
# subcommand:  frwatch operator | frwatch agent | frwatch analyze s3://...
# Build from the repository root:  docker build -t ghcr.io/frwatch/frwatch:0.1.0 .
# Pin the base by digest for releases:  --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build: a virtualenv with the pinned runtime (requirements/image.lock) and frwatch's wheel ----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/frwatch
COPY requirements/image.lock requirements/image.lock
RUN /opt/frwatch/bin/pip install --no-deps -r requirements/image.lock
# a C compiler for the summarizer's extension (analyzers/frwatch_analyzers/decode/_fastscan.c); build stage only:
# the runtime stage copies the virtualenv, not the compiler (the slim base has Python's headers). libc6-dev
# is left unpinned on purpose: it must equal the base's libc6, which moves with the base's point release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc=4:12.2.0-3 libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py README.md ./
COPY analyzers/ analyzers/
COPY operator/ operator/
# never dev/ (frwatch_dev: local cluster, workloads, demo, test helpers): not in the image, see .dockerignore
RUN /opt/frwatch/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/frwatch/bin/pip install --no-deps /wheels/frwatch-*.whl \
    && /opt/frwatch/bin/python -m compileall -q /opt/frwatch \
    && /opt/frwatch/bin/python -c "import frwatch_analyzers.decode._fastscan" \
    && /opt/frwatch/bin/frwatch --help

# --- runtime: the virtualenv on a clean base, a non-root user, nothing else -------------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="frwatch" \
      org.opencontainers.image.description="Flight Recorder capture and diagnosis for distributed PyTorch jobs" \
      org.opencontainers.image.licenses="Apache-2.0"
# The same uid/gid as the chart's securityContext and the analyzer Job (65532).
RUN groupadd --system --gid 65532 frwatch \
    && useradd --system --no-log-init --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin frwatch
COPY --from=build /opt/frwatch /opt/frwatch
ENV PATH=/opt/frwatch/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
USER 65532:65532
ENTRYPOINT ["frwatch"]
CMD ["--help"]
