# One image for the tailtune api, worker, Spark master/worker and MLflow server (see docker-compose.yml).
# Build: docker build -t tailtune .
FROM python:3.11-slim-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends build-essential curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
ENV PATH=/root/.cargo/bin:$PATH
WORKDIR /src
COPY . .
# tailtune-client (not on PyPI) before tailtune, which requires it
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -U pip maturin \
    && /opt/venv/bin/pip install --no-cache-dir ./clients/python \
    && /opt/venv/bin/pip install --no-cache-dir . "psycopg[binary]>=3.1" \
    && VIRTUAL_ENV=/opt/venv /opt/venv/bin/maturin build --release -m simulator/py/Cargo.toml -o /tmp/wheels \
    && /opt/venv/bin/pip install --no-cache-dir /tmp/wheels/*.whl

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    TAILTUNE_HOME=/data
WORKDIR /data
EXPOSE 8000
CMD ["tailtune", "serve", "--host", "0.0.0.0"]
