# CI's stand-in for python:3.11-slim (Docker Hub is out of reach): Debian 12's Python 3.11 with
# venv on the Debian base CI makes with mmdebstrap.
ARG BASE
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
