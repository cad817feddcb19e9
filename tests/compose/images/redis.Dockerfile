# CI's stand-in for redis:7: Debian 12's redis-server (7.0), redis-server and redis-cli on PATH.
ARG BASE
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/*
CMD ["redis-server"]
