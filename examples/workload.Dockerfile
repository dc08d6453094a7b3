# syntax=docker/dockerfile:1
# The examples' training image: torch and frwatch's demo workloads (frwatch_dev.workloads,
# frwatch_dev.demo.gpu_hang). No image is published; build and push it yourself, from the repository root:
#   docker build -f examples/workload.Dockerfile -t REGISTRY/frwatch-workload:0.1.0 .
#   docker push REGISTRY/frwatch-workload:0.1.0
# then put REGISTRY/frwatch-workload:0.1.0 in the examples' `image:` fields.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
FROM ${PYTHON_IMAGE}
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /src
COPY requirements/ requirements/
# torch and what it pulls in at the versions the tests ran with (dev.lock, torch-cuda.constraints)
RUN pip install --no-deps -r requirements/image.lock \
    && pip install -c requirements/dev.lock -c requirements/torch-cuda.constraints "torch==2.13.0"
COPY pyproject.toml README.md ./
COPY analyzers/ analyzers/
COPY operator/ operator/
COPY dev/ dev/
RUN pip install --no-deps . && python -c "import frwatch_dev.workloads.faulty_training, torch"
WORKDIR /tmp
USER 65532:65532
