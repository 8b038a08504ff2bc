.PHONY: install lint test bench all

install:
	pip install -e '.[test]'

lint:
	ruff check .
	mypy

test: lint
	python -m pytest

bench:
	python bench/parse_bench.py

all: install test
