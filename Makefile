# The two commands a newcomer needs: `make demo` and `make test`.
# Each sets everything up on first use (venv from pyproject.toml, Kafka jars
# from Maven Central, Toxiproxy from the Go module proxy) and is a no-op after.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup setup-clients setup-browser setup-docker demo docs test test-all test-fast lint bench clean

# Kafka 3.9.1 (ZooKeeper, the default) and 4.4.0 (KRaft, KIP-848): the catalogue and the tests run both
setup: $(STAMP)
	@$(BIN)/chaos setup
	@# the JVM jars (java/interceptor: the ConsumerInterceptor of JVM command members; java/share-member: the Java
	@# share-group member), built with Maven into the cache
	@$(BIN)/python -m chaos.workload.maven_build >/dev/null

# the client library releases the tests run members on (client_version; docs/client-versions.md), prepared into the
# cache once: confluent-kafka wheels from PyPI, kafka-clients + VerifiableConsumer from Maven Central
TEST_CLIENTS = confluent-kafka==2.12.0 confluent-kafka==2.14.0 java==4.1.0 kafka-python==2.0.0 kafka-python==2.2.15 \
	kafka-python==2.3.3
setup-clients: $(STAMP)
	@$(BIN)/chaos setup $(addprefix --client ,$(TEST_CLIENTS)) >/dev/null 2>$(VENV)/setup-clients.log || \
	  { cat $(VENV)/setup-clients.log; exit 2; }

# headless Chromium for the report's rendering test (Debian package; root). Without it that one test
# is skipped and says why.
setup-browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "chromium unavailable: the report screenshot test will be skipped"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@# setuptools warns on every editable install ("be careful with folders ... same name as your package"),
	@# which pip >= 25 prints as a 12-line BuildBackendWarning: advice for the package's authors, not its users
	@PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,report,docs]'
	@rm -f $(VENV)/.installed-* && touch $@

demo: setup
	$(BIN)/chaos demo --out out/demo

# the docs site, strict: a broken link, a missing page or an invalid docstring in the generated references fails
docs: setup
	@$(BIN)/python -m sphinx -W --keep-going -q -b html docs out/docs
	@echo "docs: out/docs/index.html"

# docker backend: docker.io + debootstrap from apt when missing (root); if that is impossible the
# line printed says why and the docker tests are skipped with that reason
setup-docker: $(STAMP)
	@scripts/docker-engine.sh install || echo "docker backend unavailable (see above): docker tests will be skipped"

# the docker tests run with an engine of their own inside a network namespace of their own
test: setup setup-clients setup-browser setup-docker lint
	$(BIN)/python -m pytest --ignore=tests/docker $(SLOW)
	@# images are built in the root namespace (debootstrap needs Debian's mirror; the test namespace has
	@# only loopback), into the engine's data root that the namespaced engine then uses
	PYTHON=$(BIN)/python scripts/docker-engine.sh run -- $(BIN)/python -m chaos.cluster.images
	PYTHON=$(BIN)/python scripts/docker-engine.sh run -- $(BIN)/python -m chaos.cluster.images 4.4.0
	PYTHON=$(BIN)/python scripts/docker-engine.sh run --netns kafka-chaos-test -- $(BIN)/python -m pytest tests/docker $(SLOW)

# nightly size (docs/testing.md): make test plus every test marked slow — more seeds, every catalogue variant
# and example, spark-submit, the nightly-mixed shrink. For a nightly CI job, not for every change.
test-all: SLOW := --run-slow
test-all: test

# ruff and mypy (config in pyproject.toml); silent when clean
lint: setup
	@$(BIN)/ruff check --quiet chaos tests bench fixtures examples docs
	@$(BIN)/mypy --no-error-summary chaos

test-fast: setup
	$(BIN)/python -m pytest -m "not integration"

bench: setup setup-docker
	$(BIN)/python bench/cluster_start.py
	$(BIN)/python bench/cluster_start_docker.py

clean:
	rm -rf $(VENV) out
