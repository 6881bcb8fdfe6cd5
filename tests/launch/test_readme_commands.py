"""Every launcher command in the README and the docs pages still parses: each flag it gives
exists, takes its value, and belongs to the task it names (the trainer's
settings checks run before any data is read)."""

import collections
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

from tests import conftest

# Parses each command's flags as the launcher would and, for a launcher with
# task flags, builds the task's config from them (no data read). One process
# imports TF and TFF once (about 6 s) and forks a child per launcher, whose
# flags would collide with another launcher's in one process.
_PARSE = textwrap.dedent('''
    import importlib, json, os, sys, traceback
    import tensorflow, tensorflow_federated
    from absl import flags
    failed = 0
    for module_name, argvs in json.loads(sys.argv[1]).items():
      if os.fork():
        failed |= os.waitstatus_to_exitcode(os.wait()[1]) != 0
        continue
      try:
        module = importlib.import_module(module_name)
        common = sys.modules.get('launch.common')  # the launchers with task flags
        for argv in argvs:
          flags.FLAGS.unparse_flags()
          flags.FLAGS([module_name, *argv])
          if common:
            common.task_config()
          print('parsed', module_name, *argv, flush=True)
      except BaseException:
        print(module_name, traceback.format_exc(), file=sys.stderr, flush=True)
        os._exit(1)
      os._exit(0)
    sys.exit(failed)
''')


def _readme_commands() -> dict[str, list[list[str]]]:
  """Launcher module -> the flag lists of its commands in the README and docs/."""
  pages = [conftest.REPO / 'README.md', *sorted((conftest.REPO / 'docs').glob('*.md'))]
  text = '\n'.join(page.read_text() for page in pages).replace('\\\n', ' ')
  commands = collections.defaultdict(list)
  for line in text.splitlines():
    found = re.search(r'python -m (launch\.\w+)((?: +--[^\s`]+)*)', line)
    if found:
      commands[found[1]].append(shlex.split(found[2]))
  return commands


@pytest.mark.slow
def test_every_readme_command_parses_and_fits_its_task():
  commands = _readme_commands()
  assert {'launch.train', 'launch.centralized', 'launch.matrix',
          'launch.study'} <= set(commands)
  import json  # pylint: disable=g-import-not-at-top
  done = subprocess.run([sys.executable, '-c', _PARSE, json.dumps(commands)],
                        cwd=conftest.REPO, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  for module, argvs in commands.items():
    assert done.stdout.count(f'parsed {module} ') + done.stdout.count(
        f'parsed {module}\n') == len(argvs), module
