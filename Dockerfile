FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# LOCAL_IMAGES=charliecloud (docker compose build --build-arg LOCAL_IMAGES=charliecloud): local
# tasks run in their dockerImage. Off by default: charliecloud-builders pulls in docker.io and
# buildah, several hundred MB the image does not need otherwise.
ARG LOCAL_IMAGES=
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm bubblewrap \
    $([ "$LOCAL_IMAGES" = charliecloud ] && echo charliecloud-runtime charliecloud-builders) \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY portal portal
COPY jobs jobs
COPY clusters clusters
RUN pip install --no-cache-dir -c constraints.txt .
COPY package.json ./
RUN npm install --no-audit --no-fund --omit=dev
COPY . .
RUN DATABASE_URL=sqlite:////tmp/build.sqlite3 SECRET_KEY=build python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "portal.asgi:application"]
