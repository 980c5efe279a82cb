# The README's two commands: `make demo` (install everything, then run the main job) and `make test`.
.PHONY: demo setup test lint clean

demo: setup
	.venv/bin/python -m jobs.quickstart

setup:
	bash scripts/setup.sh

test: setup
	bash scripts/test.sh

lint: setup
	.venv/bin/ruff check . && .venv/bin/mypy && .venv/bin/lint-imports && cargo clippy --workspace --all-targets -- -D warnings

clean:
	rm -rf target .tailtune
