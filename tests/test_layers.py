"""The layers import downward only: the algorithms describe rounds, the
composer composes them and the registry builds them, and none knows a runtime,
task or launcher; the
library knows no launcher; tasks know no algorithm."""

import ast

import pytest

from tests import conftest

FORBIDDEN = {
    'tff_rec/algorithms': ('tff_rec.runtime', 'tasks', 'launch'),
    'tff_rec/composer.py': ('tff_rec.runtime', 'tasks', 'launch'),
    'tff_rec/registry.py': ('tff_rec.runtime', 'tasks', 'launch'),
    'tff_rec': ('tasks', 'launch'),
    'tasks': ('tff_rec.algorithms', 'tff_rec.registry', 'launch'),
}


def _imports(path) -> set[str]:
  names = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      names |= {alias.name for alias in node.names}
    elif isinstance(node, ast.ImportFrom) and node.module:
      names |= {node.module} | {f'{node.module}.{alias.name}' for alias in node.names}
  return names


@pytest.mark.parametrize('folder', sorted(FORBIDDEN))
def test_no_module_imports_a_layer_above_it(folder):
  place = conftest.REPO / folder
  for path in sorted(place.rglob('*.py') if place.is_dir() else [place]):
    for name in _imports(path):
      for forbidden in FORBIDDEN[folder]:
        assert not (name == forbidden or name.startswith(forbidden + '.')), (
            f'{path.relative_to(conftest.REPO)} imports {name}')
