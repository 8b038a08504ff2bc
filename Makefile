.PHONY: install lint test smoke bench all

install:
	pip install -e '.[test]'

lint:
	ruff check .
	mypy

test: lint
	python -m pytest

smoke:
	python -m pytest tests/unit -q -m "not integration and not e2e" -p no:cacheprovider

bench:
	python bench/parse_bench.py

all: install test
