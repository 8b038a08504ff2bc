.PHONY: install lint test test-long smoke bench all

install:
	pip install -e '.[test]'

lint:
	ruff check .
	mypy

test: lint
	python -m pytest -n 2 --dist loadfile

test-long: lint
	LOGWATCH_LONG_E2E=1 python -m pytest -n 2 --dist loadfile

smoke:
	python -m pytest tests/unit -q -m "not integration and not e2e" -p no:cacheprovider

bench:
	python bench/parse_bench.py

all: install test
