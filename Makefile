.PHONY: install lint test test-long smoke bench all

install:
	pip install -e '.[test]'

lint:
	ruff check .
	mypy

test: lint
	python -m pytest -n 2 --dist loadfile --ignore=tests/e2e
	python -m pytest tests/e2e

test-long: lint
	python -m pytest -n 2 --dist loadfile --ignore=tests/e2e
	LOGWATCH_LONG_E2E=1 python -m pytest tests/e2e

smoke:
	python -m pytest tests/unit -q -m "not integration and not e2e" -p no:cacheprovider

bench:
	python bench/parse_bench.py

all: install test
