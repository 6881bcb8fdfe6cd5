"""BUILD and the tree stay in step: every tests/ file and package has a target, and
every test's target carries the modules its test imports."""

import ast
import functools
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


def _targets() -> dict[str, dict[str, list[str]]]:
  """BUILD's targets by name, {'srcs', 'deps', 'data'} (this repository's labels only),
  BUILD evaluated as the Python its Starlark is."""
  targets = {}

  def rule(name, srcs=(), deps=(), data=(), **unused):
    own = lambda labels: [label[1:] for label in labels if label.startswith(':')]
    targets[name] = {'srcs': list(srcs), 'deps': own(deps), 'data': own(data)}

  def glob(patterns, exclude=()):
    return sorted({str(p.relative_to(conftest.REPO)) for pattern in patterns
                   for p in conftest.REPO.glob(pattern) if p.is_file()} - set(exclude))

  exec(compile(BUILD, 'BUILD', 'exec'), {  # pylint: disable=exec-used
      'load': lambda *unused: None, 'package': lambda **unused: None, 'glob': glob,
      'requirement': lambda name: f'@pypi//{name}',
      **dict.fromkeys(('py_library', 'py_binary', 'py_test', 'cc_binary'), rule)})
  return targets


def _reachable(targets, name: str, seen: set[str]) -> set[str]:
  """The files a target carries at run time: its srcs, and its deps' and data's."""
  if name in seen:
    return set()
  seen.add(name)
  target = targets[name]
  files = {f for f in target['srcs'] if f.endswith('.py')}
  for other in target['deps'] + target['data']:
    files |= _reachable(targets, other, seen)
  return files


@functools.cache
def _repo_imports(path: str) -> frozenset[str]:
  """The repository's module files that `path` imports, at any depth of its code."""
  modules = set()
  for node in ast.walk(ast.parse((conftest.REPO / path).read_text())):
    names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
             [node.module] + [f'{node.module}.{a.name}' for a in node.names]
             if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
    for name in names:
      file = name.replace('.', '/')
      for candidate in (f'{file}.py', f'{file}/__init__.py'):
        if (conftest.REPO / candidate).is_file():
          modules.add(candidate)
  return frozenset(modules)


def test_every_test_target_carries_the_modules_its_test_imports():
  """Each py_test's file and the repository modules it imports, followed module by
  module, are in the files its target carries (srcs, deps, data): else bazel's
  run of it fails where pytest's passes."""
  targets = _targets()
  missing = {}
  for name, target in targets.items():
    test = next((f for f in target['srcs'] if re.search(r'/test_\w+\.py$|^tests/test_', f)),
                None)
    if test is None:
      continue
    carried = _reachable(targets, name, set())
    todo, done = [test], set()
    while todo:
      path = todo.pop()
      done.add(path)
      imported = _repo_imports(path)
      todo += [m for m in imported - done if m in carried and m not in todo]
      lacking = {m for m in imported - carried if not m.endswith('__init__.py')}
      if lacking:
        missing.setdefault(name, set()).update(lacking)
  assert not missing, f'add to these targets (deps or data): {missing}'
