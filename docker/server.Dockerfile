# SPDX-License-Identifier: GPL-3.0-or-later
# The inference server (Open Inference Protocol v2) with a CUDA build of torch, for a GPU node
# behind KServe or any Kubernetes Service. See docs/scaling.md. Build from the repository root:
#
#   docker build -f docker/server.Dockerfile -t sapiens-server .
#   docker run --gpus all -p 8080:8080 -e SAPIENS_TOKEN=<secret> \
#              -v /srv/sapiens-weights:/models:ro sapiens-server
#
# Not built or run in this project's CI (no Docker there): check it on your own registry first.
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04

# torch's CUDA wheels come from PyTorch's own index; pick the CUDA line matching the base image.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu128

ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH
# libgl1/libglib2.0-0: OpenCV (the offline MediaPipe backend) links them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv libgl1 libglib2.0-0 \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv \
 && pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY inference_server ./inference_server
COPY sapiens_blender ./sapiens_blender
# torch pinned again so that no extra's resolver swaps the CUDA build for another one.
RUN pip install ".[server,sapiens]" "torch==${TORCH_VERSION}" --extra-index-url "${TORCH_INDEX}"

# Weights: mount them at /models (<dir>/<Hugging Face repo name>/...) or a Hugging Face cache at
# /cache/huggingface; nothing is downloaded when HF_HUB_OFFLINE=1.
ENV SAPIENS_WEIGHTS_DIR=/models HF_HOME=/cache/huggingface SAPIENS_DEVICE=cuda
RUN mkdir -p /models /cache/huggingface && useradd --create-home --uid 1000 sapiens
USER sapiens
EXPOSE 8080
# Token from the environment (SAPIENS_TOKEN, e.g. a Kubernetes Secret); no token = no start.
# --allow-remote: bound to all interfaces inside the pod; the bearer token still guards every
# request except the health probes. Add --allowed-host NAME to pin the Host header.
ENTRYPOINT ["python", "-m", "inference_server", "--host", "0.0.0.0", "--port", "8080", "--allow-remote"]
CMD ["--max-batch", "8", "--max-queue", "64"]
