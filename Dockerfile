# One image for every process; docker-compose.yml picks the command (api, worker, dead-letter, scheduler, migrate).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/app/.venv

RUN pip install --no-cache-dir uv

WORKDIR /app

# Dependencies first, in their own layer: it is rebuilt only when the lock file changes.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-project

# Only what the processes need: no .venv, var/, tests/, bench/ or devtools/ (dev tooling, never shipped) from
# the build context; README.md is the package's readme, which the build of the project reads.
COPY README.md alembic.ini ./
COPY alembic ./alembic
COPY app ./app
COPY workers ./workers
RUN uv sync --frozen --no-dev

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin app \
    && mkdir -p /data/outputs \
    && chown -R app:app /data
USER app

ENV PATH=/app/.venv/bin:$PATH \
    OUTPUT_DIR=/data/outputs

EXPOSE 8000
# API_WORKERS processes (settings default 1; compose sets 0 = one per core).
CMD ["python", "-m", "app.serve", "--host", "0.0.0.0", "--port", "8000"]
