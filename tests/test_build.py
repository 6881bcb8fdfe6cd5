"""BUILD and the tree stay in step: every tests/ file and package has a target."""

import ast
import re

import pytest

from tests import conftest

BUILD = (conftest.REPO / 'BUILD').read_text()
LISTED = set(re.findall(r'"((?:tests|tff_rec|tasks|experiments|launch)/[\w/]+\.py)"', BUILD))
GLOBBED = set(re.findall(r'"([\w/]+)/\*\.py"', BUILD))  # in any glob


def _python_files(top):
  return {str(p.relative_to(conftest.REPO)) for p in (conftest.REPO / top).rglob('*.py')}


def test_every_tests_file_is_in_a_target():
  missing = _python_files('tests') - LISTED
  assert not missing, f'add these to BUILD (py_test or test_support): {sorted(missing)}'


def test_every_test_module_has_its_own_py_test():
  tests = {f for f in _python_files('tests') if f.rsplit('/', 1)[-1].startswith('test_')}
  listed_tests = set(re.findall(r'^    "(tests/[\w/]+/test_\w+\.py|tests/test_\w+\.py)",$',
                                BUILD, re.M))
  assert tests == listed_tests


def test_every_package_file_is_in_a_library():
  for top in ('tff_rec', 'tasks', 'experiments', 'launch'):
    for path in _python_files(top):
      folder = path.rsplit('/', 1)[0]
      launcher = re.fullmatch(r'launch/(\w+)\.py', path)
      covered = (path in LISTED or folder in GLOBBED
                 or (launcher and f'"{launcher[1]}",' in BUILD))  # binary list
      assert covered, f'{path} is in no BUILD target'


def test_every_requirement_is_a_declared_package():
  """A requirement() missing from WORKSPACE's pypi list fails bazel's analysis of every
  target that depends on it (CI's bazel run, not pytest, was the first to see scipy's)."""
  workspace = (conftest.REPO / 'WORKSPACE').read_text()
  declared = set(re.findall(r'^ +"([\w.-]+)",$',
                            workspace.split('pypi(', 1)[1].split(')', 1)[0], re.M))
  required = set(re.findall(r'requirement\("([\w.-]+)"\)', BUILD))
  assert required <= declared, f'add to WORKSPACE pypi packages: {sorted(required - declared)}'


def test_listed_files_exist_and_build_parses():
  for path in LISTED:
    assert (conftest.REPO / path).is_file(), f'BUILD lists missing {path}'
  ast.parse(BUILD)  # Starlark here is a subset of Python syntax


@pytest.mark.parametrize('ci, outcome', [
    ('true', pytest.fail.Exception), ('TRUE', pytest.fail.Exception),
    ('1', pytest.fail.Exception), ('', pytest.skip.Exception),
    ('false', pytest.skip.Exception)])
def test_a_missing_real_dataset_fails_under_ci_and_skips_elsewhere(ci, outcome, monkeypatch):
  """Caught as any outcome and its type compared: under pytest.raises(Failed) a wrong
  skip would escape and skip this test instead of failing it."""
  monkeypatch.setenv('CI', ci)
  try:
    conftest._real_data('no-such-dataset', 'u.data')  # pylint: disable=protected-access
  except BaseException as stopped:  # pylint: disable=broad-exception-caught
    raised = stopped
  else:
    raised = None
  assert type(raised) is outcome, raised  # pylint: disable=unidiomatic-typecheck
  assert 'real dataset no-such-dataset not found' in str(raised)
