"""Entry point of the bazel py_test targets: runs pytest on the given files."""

import sys

import pytest

if __name__ == '__main__':
  sys.exit(pytest.main(sys.argv[1:]))
