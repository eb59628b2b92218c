# The operator image: `docker build -t orca-controller:0.1.0 .`
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY controller ./controller
RUN pip install --no-cache-dir . && useradd --uid 10001 orca
USER 10001
ENTRYPOINT ["orca"]
CMD ["run"]
