r"""Rebuilds every committed results table from its records, without training or
the datasets, and names each file that differs from the committed one.

  python -m launch.rebuild_tables           # rebuild into a temporary folder, compare
  python -m launch.rebuild_tables --write   # rebuild results/ in place
  python -m launch.rebuild_tables --tables=colr_movielens,fair_goodreads

Each table's script runs with --only=none on a copy of its results folder
(records, and the values derived from the data in cells/derived.json:
experiments.run_records.derived). A table that does not rebuild byte for byte has drifted
from its records; a derived.json the rebuild had to add to means a value the
table shows was never recorded. TensorFlow and TFF are imported once and each
script runs in a forked child: the scripts define flags of the same names.

The verdict blocks of results/README.md and of each folder's README are written
from results/claims.toml (experiments.claims) after the tables: a block that
differs from the one its claims give is named too.
"""

import filecmp
import importlib
import os
import pathlib
import shutil
import sys
import tempfile

from absl import app
from absl import flags

from experiments import claims
from experiments import rebuilds
from launch import common

flags.DEFINE_bool('write', False, 'Rebuild the committed tables in place instead of '
                  'comparing a rebuild with them.')
flags.DEFINE_list('tables', None, 'Only these results folders (default: every one).')

FLAGS = flags.FLAGS
OWN_FLAGS = ('write', 'tables')
RESULTS = pathlib.Path('results')


def _run_forked(module: str, argv: list[str], log: pathlib.Path) -> int:
  """launch `module`'s main with `argv` in a forked child (its output in `log`);
  its exit status."""
  sys.stdout.flush()  # else the child would print the parent's buffer again
  sys.stderr.flush()
  pid = os.fork()
  if pid == 0:  # the child: never returns
    code = 1
    try:
      with open(log, 'w') as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        sys.argv = [module, *argv]
        for name in OWN_FLAGS:  # the script may define flags of these names
          delattr(FLAGS, name)
        common.run(importlib.import_module(module).main)
        code = 0
    except SystemExit as e:
      code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
      if isinstance(e.code, str):  # what the interpreter would have printed
        print(e.code, file=sys.stderr)
    except BaseException:  # pylint: disable=broad-except
      import traceback  # pylint: disable=g-import-not-at-top
      traceback.print_exc()
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os._exit(code)  # no atexit handlers (the parent's TFF context is not the child's)
  _, status = os.waitpid(pid, 0)
  return os.waitstatus_to_exitcode(status)


def rebuild(chosen: list[rebuilds.Rebuild], write: bool) -> dict[str, list[str]]:
  """Rebuilds each table (in place with `write`); folder -> its differing files.

  A folder is rebuilt from a copy of its records and READMEs alone, so a file the
  rebuild no longer writes (e.g. the plot of rows since withdrawn) shows as stale.
  """
  differences = {}
  with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    folders = dict.fromkeys(table.folder for table in chosen)  # in order, once each
    for folder in folders:
      committed = RESULTS / folder
      target = committed if write else scratch / folder
      if not write:
        shutil.copytree(committed, target, ignore=lambda path, names: [
            name for name in names
            if pathlib.Path(path) == committed and name not in ('cells', 'README.md')])
      for number, table in enumerate(t for t in chosen if t.folder == folder):
        log = scratch / f'{folder}_{number}.log'
        runs = scratch / 'runs' / folder
        places = [place.format(runs=runs, results=target) for place in table.places]
        code = _run_forked(table.module, ['--only=none', *places, *table.args], log)
        if code:
          differences.setdefault(folder, []).append(
              f'{table.module} exited {code}: {log.read_text()[-2000:]}')
    root = RESULTS if write else scratch
    _write_verdicts(list(folders), root, top=len(folders) == len(
        {r.folder for r in rebuilds.REBUILDS}))
    for folder in folders:
      if not write and folder not in differences:
        differences[folder] = rebuilds.differing(RESULTS / folder, scratch / folder)
    if not write and (scratch / 'README.md').exists() and not filecmp.cmp(
        RESULTS / 'README.md', scratch / 'README.md', shallow=False):
      differences['.'] = ['README.md']
  return {folder: files for folder, files in differences.items() if files}


def _write_verdicts(folders: list[str], root: pathlib.Path, top: bool) -> None:
  """The verdict blocks of the READMEs under `root` (of `folders`' claims, and of
  results/README.md when every folder was rebuilt), judged from the committed
  records (experiments.claims)."""
  try:
    claims.write_blocks(RESULTS, root, folders, top)
  except claims.ClaimError as e:  # names the claim and its field, or the record
    raise app.UsageError(str(e)) from None


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  if not RESULTS.is_dir():  # the tables' scripts read and write paths from the root
    raise app.UsageError(f'no {RESULTS}/ folder in {pathlib.Path.cwd()}: run it from the '
                         'repository root')
  folders = {r.folder for r in rebuilds.REBUILDS}
  if FLAGS.tables == []:  # pylint: disable=g-explicit-bool-comparison; --tables= (None: all)
    raise app.UsageError(f'--tables is empty; name some of {", ".join(sorted(folders))}, '
                         'or leave it out for every one')
  common.check_choices('tables', FLAGS.tables or [], folders)
  chosen = [r for r in rebuilds.REBUILDS if not FLAGS.tables or r.folder in FLAGS.tables]
  differences = rebuild(chosen, FLAGS.write)
  for folder, files in differences.items():
    print(f'{folder}: ' + '; '.join(files), flush=True)
  if differences:
    raise SystemExit(f'{len(differences)} results folders do not rebuild from their records'
                     + (' (see the errors above)' if FLAGS.write else ''))
  print(f'rebuilt {len(chosen)} tables in place' if FLAGS.write else
        f'all {len(chosen)} tables rebuild byte for byte from their records', flush=True)


if __name__ == '__main__':
  common.run(main)
