# The gpufinops image: one entrypoint (`gpufinops`), the runtime dependencies pinned by
# constraints.txt (no dev or test packages), the dbt project under the venv's share/, a non-root user,
# and every write under GPUFINOPS_HOME (the volume) or /tmp, so readOnlyRootFilesystem works.
#
#   make image                       # buildah, no daemon; builds the base from Debian when no registry
#   docker build -t gpufinops .      # with a daemon and a registry: the official python:3.11-slim
#
# BASE must provide python3 (3.11) with venv, /bin/sh and coreutils `date` (the report CronJobs).
ARG BASE=python:3.11-slim

# 1. The runtime dependencies in a venv: their own stage and layer, so a source change does not
#    reinstall or re-copy them.
FROM ${BASE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
RUN python3 -m venv /opt/gpufinops
WORKDIR /src
COPY pyproject.toml constraints.txt ./
# A network that intercepts TLS needs its CA to reach the index: `make image` passes the build host's
# bundle as the secret `ca-certificates` (used by pip here only; nothing of it lands in the image).
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
 && /opt/gpufinops/bin/pip install -q -c constraints.txt -r requirements.txt

# 2. The package's wheel: only what pyproject ships (its packages and the dbt project's data files).
FROM deps AS wheel
COPY README.md dbt_project.yml profiles.yml ./
COPY gpufinops gpufinops
COPY cli cli
COPY ingest ingest
COPY transform transform
COPY recommender recommender
COPY changes changes
COPY controller controller
COPY api api
COPY dashboards dashboards
COPY reports reports
COPY simulator simulator
COPY exports exports
COPY models models
COPY macros macros
COPY seeds seeds
COPY tests/dbt tests/dbt
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && /opt/gpufinops/bin/pip wheel -q --no-deps -c constraints.txt -w /wheels .

# 3. The runtime: the dependencies' stage (the base and the venv, no build tools) plus a user and
#    the wheel; pip itself is removed. (Starting from `deps` rather than copying its 1.5 GB venv
#    keeps a cached rebuild from re-hashing it.)
FROM deps
ARG UID=10001
WORKDIR /
RUN groupadd --gid ${UID} gpufinops \
 && useradd --uid ${UID} --gid ${UID} --home-dir /var/lib/gpufinops --no-create-home --shell /usr/sbin/nologin gpufinops \
 && install -d -o ${UID} -g ${UID} -m 0750 /var/lib/gpufinops \
 && rm -rf /src
COPY --from=wheel /wheels /tmp/wheels
RUN /opt/gpufinops/bin/python -m pip install -q --no-deps --no-index /tmp/wheels/*.whl \
 && /opt/gpufinops/bin/python -m pip uninstall -q -y pip \
 && rm -rf /tmp/wheels
# Every tool that writes under $HOME (dbt, Streamlit, matplotlib, fontconfig) writes into the home
# volume; dbt's target/ and logs/ go to <home>/dbt (transform/runner.py); Python writes no bytecode.
ENV PATH=/opt/gpufinops/bin:$PATH \
    GPUFINOPS_HOME=/var/lib/gpufinops \
    HOME=/var/lib/gpufinops \
    XDG_CACHE_HOME=/var/lib/gpufinops/.cache \
    XDG_CONFIG_HOME=/var/lib/gpufinops/.config \
    MPLCONFIGDIR=/var/lib/gpufinops/.cache/matplotlib \
    DBT_SEND_ANONYMOUS_USAGE_STATS=false \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER ${UID}:${UID}
WORKDIR /var/lib/gpufinops
VOLUME ["/var/lib/gpufinops"]
EXPOSE 8000 8501
ENTRYPOINT ["gpufinops"]
CMD ["--help"]
