"""The algorithms package's layering, read from its source: an algorithm module
(one that registers or implements an algorithm) imports no other algorithm
module and no runtime, no builder reads which runtime runs it (the runner
decides that once; the registry builds for it), and none makes its aggregation
(the composer adds it)."""

import ast
import pathlib

from tests import conftest

PACKAGE = conftest.REPO / 'tff_rec' / 'algorithms'


def _imports(path: pathlib.Path) -> set[str]:
  """The modules `path` imports, as dotted names (`from a import b`: a.b)."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      names.update(f'{node.module}.{alias.name}' for alias in node.names)
  return names


def _registers(path: pathlib.Path) -> bool:
  return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name) and node.func.value.id == 'registry'
             and node.func.attr in ('register', 'implement')
             for node in ast.walk(ast.parse(path.read_text())))


def _reads_runtime(path: pathlib.Path) -> bool:
  return any(isinstance(node, ast.Attribute) and node.attr == 'runtime'
             for node in ast.walk(ast.parse(path.read_text())))


def test_no_algorithm_module_imports_another_or_the_runtime_or_reads_it():
  modules = {p.stem: p for p in PACKAGE.glob('*.py')}
  algorithms = {name for name, path in modules.items() if _registers(path)}
  assert {'baselines', 'fair', 'fedmf', 'fedsubavg', 'metaua', 'scaffold',
          'table_updates'} <= algorithms, algorithms
  for name in algorithms:
    imported = _imports(modules[name])
    others = {m for m in imported
              if m.rpartition('.')[2] in algorithms - {name} and 'algorithms' in m}
    assert not others, f'{name} imports {others}'
    assert not {m for m in imported if m.startswith('tff_rec.runtime')}, name
    assert not _reads_runtime(modules[name]), f'{name} reads training.runtime'
  for name, path in modules.items():  # the shared parts neither
    assert not {m for m in _imports(path) if m.startswith('tff_rec.runtime')}, name


def _aggregation_made(path: pathlib.Path) -> set[str]:
  """What `path` does that only the composer may: call an InnerAggregator's
  factories (`x.aggregator.mean(...)`, `.unweighted`, `.dp_mean`, `.sum`) or read
  FedSubAvg's scales (`table_scales`, `row_scales`)."""
  made = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in ('mean', 'unweighted', 'dp_mean', 'sum')
        and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == 'aggregator'):
      made.add(f'aggregator.{node.func.attr}()')
    elif isinstance(node, ast.Attribute) and node.attr in ('table_scales', 'row_scales'):
      made.add(node.attr)
  return made


def test_no_algorithm_module_makes_its_aggregation():
  """The composer (tff_rec/composer.py) adds the inner aggregation the user chose
  and the stacked correction; an algorithm's builder supplies only its parts."""
  for path in PACKAGE.glob('*.py'):
    if _registers(path):
      assert not _aggregation_made(path), f'{path.stem} makes {_aggregation_made(path)}'
  assert _aggregation_made(conftest.REPO / 'tff_rec' / 'composer.py') >= {
      'aggregator.mean()', 'aggregator.unweighted()', 'table_scales'}
