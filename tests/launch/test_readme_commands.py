"""Every launcher command in the README still parses: each flag it gives
exists, takes its value, and belongs to the task it names (the trainer's
settings checks run before any data is read)."""

import collections
import re
import shlex
import subprocess
import sys
import textwrap

from tests import conftest

# Parses each command's flags as the launcher would and, for a launcher with
# task flags, builds the task's config from them (no data read).
_PARSE = textwrap.dedent('''
    import importlib, json, sys
    module = importlib.import_module(sys.argv[1])
    from absl import flags
    common = sys.modules.get('launch.common')  # the launchers with task flags
    for argv in json.loads(sys.argv[2]):
      flags.FLAGS.unparse_flags()
      flags.FLAGS([sys.argv[1], *argv])
      if common:
        common.task_config()
      print('parsed', *argv)
''')


def _readme_commands() -> dict[str, list[list[str]]]:
  """Launcher module -> the flag lists of its commands in the README."""
  text = (conftest.REPO / 'README.md').read_text().replace('\\\n', ' ')
  commands = collections.defaultdict(list)
  for line in text.splitlines():
    found = re.search(r'python -m (launch\.\w+)((?: +--[^\s`]+)*)', line)
    if found:
      commands[found[1]].append(shlex.split(found[2]))
  return commands


def test_every_readme_command_parses_and_fits_its_task():
  commands = _readme_commands()
  assert {'launch.train', 'launch.centralized', 'launch.matrix',
          'launch.reproduce_colr'} <= set(commands)
  import json  # pylint: disable=g-import-not-at-top
  for module, argvs in commands.items():
    done = subprocess.run([sys.executable, '-c', _PARSE, module, json.dumps(argvs)],
                          cwd=conftest.REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f'{module}: {done.stderr[-2000:]}'
    assert done.stdout.count('parsed') == len(argvs), module
