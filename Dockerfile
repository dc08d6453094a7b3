# syntax=docker/dockerfile:1
# One image for the three roles; the Deployment, the injected sidecar and the analyzer Job pick the
# subcommand:  frwatch operator | frwatch agent | frwatch analyze s3://...
# The image is Debian 12's python3.11 and the libraries it loads, extracted from their packages
# (requirements/image.debs), the pinned runtime (requirements/image.lock) and frwatch's wheel with its compiled
# summarizer: no shell, no package manager (as Google's distroless images). scripts/build_image.py builds that
# root filesystem in the build stage below, and the same script builds it in the test suite
# (tests/image/test_image_build.py), where no container engine runs.
# Build from the repository root:  docker build -t ghcr.io/frwatch/frwatch:0.1.0 .
# Pin the build stage's base by digest for releases:  --build-arg DEBIAN_IMAGE=debian:bookworm-slim@sha256:...
ARG DEBIAN_IMAGE=debian:bookworm-slim

# --- build: the image's root filesystem in /rootfs --------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS build
# The builder's tools: Debian's python3.11 with pip (the interpreter the image gets: the same bytecode), a C
# compiler and Python's headers for the summarizer's extension (analyzers/frwatch_analyzers/decode/_fastscan.c).
# Unpinned on purpose: they must equal the versions of the image's own packages, which move with the point
# release. apt's lists stay: the builder fetches the image's packages with `apt-get download`.
# hadolint ignore=DL3008,DL3009
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3-pip python3.11-dev gcc libc6-dev
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements/image.debs requirements/image.lock requirements/
COPY scripts/build_image.py scripts/
COPY pyproject.toml setup.py README.md ./
COPY analyzers/ analyzers/
COPY operator/ operator/
# never dev/ (frwatch_dev: local cluster, workloads, demo, test helpers): not in the image, see .dockerignore.
# The builder fails unless the wheel holds the compiled extension; the last line runs the result as the image will.
RUN python3.11 scripts/build_image.py /rootfs --cache /tmp/image-cache \
    && rm -rf /tmp/image-cache \
    && chroot --userspec=65532:65532 /rootfs /opt/frwatch/bin/python -c "import frwatch_analyzers.decode._fastscan" \
    && chroot --userspec=65532:65532 /rootfs /opt/frwatch/bin/frwatch --version

# --- runtime: that root filesystem alone, a non-root user ------------------------------------------------
FROM scratch AS runtime
LABEL org.opencontainers.image.title="frwatch" \
      org.opencontainers.image.description="Flight Recorder capture and diagnosis for distributed PyTorch jobs" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /rootfs /
ENV PATH=/opt/frwatch/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
# The same uid/gid as the chart's securityContext and the analyzer Job (65532; /etc/passwd names it frwatch).
USER 65532:65532
ENTRYPOINT ["frwatch"]
CMD ["--help"]
