"""--import: a user's modules load before the flags are made, or the launcher
stops naming the flag, the module and its error."""

import sys

import pytest

from launch import imports


def test_import_values_are_read_in_both_flag_forms():
  assert imports.named(['train', '--import=a', '--rounds=2', '--import', 'b.py']) == [
      'a', 'b.py']


def test_a_module_file_loads_and_registers(tmp_path):
  module = tmp_path / 'registers_something.py'
  module.write_text('LOADED = True\n')
  imports.load_all([f'--import={module}'])
  assert sys.modules['registers_something'].LOADED


@pytest.mark.parametrize('module, message', [
    ('no_such_module', "--import=no_such_module: the module could not be loaded: "
     "ModuleNotFoundError: No module named 'no_such_module'"),
    ('missing.py', '--import=missing.py: the module could not be loaded: '
     'ModuleNotFoundError: no file missing.py'),
    ('', '--import= names no module'),
])
def test_a_module_that_is_missing_stops_naming_it(module, message):
  with pytest.raises(SystemExit, match=message):
    imports.load_all([f'--import={module}'])


def test_a_module_that_raises_stops_with_its_error(tmp_path):
  module = tmp_path / 'broken.py'
  module.write_text("raise RuntimeError('my registration failed')\n")
  with pytest.raises(SystemExit, match=f'--import={module}: the module could not be loaded: '
                     'RuntimeError: my registration failed'):
    imports.load_all([f'--import={module}'])
