# The portal's image. PYTHON_IMAGE: the base (python:3.11-slim; CI builds on a Debian base of
# its own, made with mmdebstrap: Docker Hub is out of its reach). LOCAL_IMAGES=charliecloud: local
# tasks run in their dockerImage (charliecloud-builders pulls in docker.io and buildah, several
# hundred MB the image does not need otherwise).
ARG PYTHON_IMAGE=python:3.11-slim

# The local backend's task wrapper and sandbox prelude (backends/local/*.c), built apart: the
# compiler stays out of the image.
FROM ${PYTHON_IMAGE} AS task-tools
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY backends/local/wrapper.c backends/local/prelude.c /src/
RUN for tool in wrapper prelude; do \
      cc -O2 -Wall -Wextra -Werror -o /src/portal-task-$tool /src/$tool.c || exit 1; \
    done

FROM ${PYTHON_IMAGE}
ARG LOCAL_IMAGES=
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/portal/bin:$PATH
# The local backend's sandbox (bubblewrap), task firewall (nftables) and per-task file system
# (mkfs.ext4; mount and losetup are util-linux's, in every Debian base); the front-end assets
# (npm).
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm bubblewrap nftables \
    e2fsprogs $([ "$LOCAL_IMAGES" = charliecloud ] && echo charliecloud-runtime charliecloud-builders) \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/portal
COPY --from=task-tools /src/portal-task-wrapper /src/portal-task-prelude /opt/portal/bin/
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY portal portal
COPY accounts accounts
COPY apikit apikit
COPY jobs jobs
COPY clusters clusters
COPY protocol protocol
COPY backends backends
# A build secret "ca" (a CA bundle: a proxy that re-signs HTTPS) reaches pip and npm for this
# step only: secrets are in no layer of the image.
RUN --mount=type=secret,id=ca \
    if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    pip install --no-cache-dir -c constraints.txt .
COPY package.json ./
RUN --mount=type=secret,id=ca \
    if [ -f /run/secrets/ca ]; then export npm_config_cafile=/run/secrets/ca; fi; \
    npm install --no-audit --no-fund --omit=dev
COPY . .
RUN DATABASE_URL=sqlite:////tmp/build.sqlite3 SECRET_KEY=build python manage.py collectstatic --noinput
EXPOSE 8000
# The web server alone, as runportal's web_command runs it (deploy/kubernetes/web.yaml runs
# this; docker-compose.yml runs the whole portal with manage.py runportal).
CMD ["python", "-m", "portal.serve", "portal.asgi:application", "--host", "0.0.0.0", "--port", "8000", \
     "--http", "h11", "--lifespan", "off", "--no-proxy-headers", \
     "--timeout-keep-alive", "75", "--timeout-graceful-shutdown", "10"]
