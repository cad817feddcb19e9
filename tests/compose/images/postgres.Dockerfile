# CI's stand-in for postgres:16: Debian 12's PostgreSQL 15 behind an entrypoint that keeps the
# part of the official image's contract docker-compose.yml uses (POSTGRES_USER, POSTGRES_DB,
# POSTGRES_PASSWORD_FILE, the data in /var/lib/postgresql/data, password logins over TCP).
ARG BASE
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
