# pairbot's GitHub App: the webhook service, served by uvicorn (`pairbot serve`).
#
#   docker build -t pairbot .
#   docker run --init -p 8080:8080 -v pairbot-data:/data --env-file pairbot.env pairbot
#
# docs/app.md lists the settings and walks through a deployment. tests/test_packaging.py
# checks this file statically (docker build is not available where the tests run): the base
# image is pinned, pip installs only this project under constraints.txt, the process runs as
# a non-root user, and the command is `pairbot serve --host 0.0.0.0 --port 8080`.

# Both stages use one tag that names the Python patch release and the Debian release (never a
# floating `3.11-slim` or `latest`), so a rebuild picks up that pair's security rebuilds only.

# ---- build: resolve and install into a virtual environment -------------------------------
FROM python:3.11.13-slim-bookworm AS build

# Bytecode is compiled here, at install time: the runtime user cannot write to /opt/pairbot.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_NO_CACHE_DIR=1

WORKDIR /src

# The venv is made without pip: the base image's pip installs into it (`--python`), so the
# only distributions in /opt/pairbot are pairbot and the versions pinned in constraints.txt.
RUN python -m venv --without-pip /opt/pairbot

COPY constraints.txt pyproject.toml README.md ./
COPY app ./app
COPY hosts ./hosts
COPY action ./action

# `-c constraints.txt`: every dependency, direct or transitive, at its locked version.
# Not editable: the image holds a built copy, not a link to /src. The `postgres` extra
# (psycopg, pinned in constraints.txt too) lets one image run as a replica on PostgreSQL
# (a postgresql:// URL in PAIR_STORE); with the default SQLite store it is never imported.
RUN pip --python /opt/pairbot/bin/python install --no-cache-dir -c constraints.txt ".[postgres]"

# ---- runtime: the venv, git, and an unprivileged user -------------------------------------
FROM python:3.11.13-slim-bookworm AS runtime

# pairbot shells out to git (checkouts, branches, pushes); ca-certificates for HTTPS remotes.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric uid/gid, so `runAsNonRoot` (Kubernetes) can verify it and a mounted volume
# can be chowned to it ahead of time.
RUN groupadd --system --gid 10001 pairbot \
    && useradd --system --uid 10001 --gid pairbot --home-dir /home/pairbot --create-home \
       --shell /usr/sbin/nologin pairbot \
    && mkdir -p /data \
    && chown pairbot:pairbot /data

COPY --from=build /opt/pairbot /opt/pairbot

ENV PATH=/opt/pairbot/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PAIR_STORE=/data/pairbot.sqlite3

# The SQLite store (and its -wal/-shm files) lives here; mount a volume to keep it.
VOLUME ["/data"]
WORKDIR /home/pairbot

USER 10001:10001

EXPOSE 8080

# No curl in a slim image: the venv's Python asks /healthz; urlopen raises (exit 1) on an
# HTTP error or a refused connection.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]

# Exec form, no shell: pairbot (uvicorn) is the container's main process and receives SIGTERM
# itself. Run with `--init` so an init reaps any orphaned grandchild of git or an agent.
# Override CMD to run another pairbot command from the same image: `docker run pairbot doctor`.
ENTRYPOINT ["pairbot"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
