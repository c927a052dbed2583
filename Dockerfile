# One image for every rllm-stream service (gateway, processors, history, trainer, serve).
FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY rllm ./rllm
COPY infra ./infra
ARG EXTRAS=gateway,clickhouse,eval,train,tinker,fireworks
RUN pip install --no-cache-dir ".[${EXTRAS}]"
ENV RLLM_HOME=/data
VOLUME /data
ENTRYPOINT ["rllm-cli"]
CMD ["--help"]
