"""Every committed results table rebuilds byte for byte from its records, and the
verdicts of results/README.md quote only what those tables show."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from experiments import claims
from experiments import rebuilds
from launch import rebuild_tables
from tests.launch import launchers

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow(seconds=25)
def test_every_committed_table_rebuilds_from_its_records_alone(tmp_path):
  """The committed results, copied where no ../shared/data is: the rebuild reads
  the records alone. A file no rebuild writes, planted in every folder, is named
  in each (so each was rebuilt and compared); one drifted table and two verdict
  blocks edited by hand are named beside it; nothing else differs."""
  results = tmp_path / 'results'
  shutil.copytree(REPO / 'results', results)
  folders = list(dict.fromkeys(r.folder for r in rebuilds.REBUILDS))
  for folder in folders:
    (results / folder / 'stale.png').write_bytes(b'a plot no rebuild writes')
  table = results / 'colr_amazon_beauty' / 'table.md'
  table.write_text(table.read_text().replace('| 0.280 ± 0.001 |', '| 0.281 ± 0.001 |', 1))
  # verdicts edited by hand inside the generated blocks, here and on the top page
  for readme in (results / 'colr_amazon_beauty' / 'README.md', results / 'README.md'):
    text = readme.read_text()
    assert '| **not testable** | CoLR r=4 0.257' in text
    readme.write_text(text.replace('| **not testable** | CoLR r=4 0.257',
                                   '| **reproduced** | CoLR r=4 0.257'))
  done = subprocess.run(
      [sys.executable, '-m', 'launch.rebuild_tables'], capture_output=True, text=True,
      check=False, cwd=tmp_path, env={**os.environ, 'PYTHONPATH': str(REPO)})
  assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
  expected = [f'{f}: ' + ('README.md; stale.png; table.md' if f == 'colr_amazon_beauty'
                           else 'stale.png') for f in folders] + ['.: README.md']
  assert done.stdout.splitlines() == expected, done.stdout[-4000:] + done.stderr[-4000:]
  assert done.stderr.endswith(
      f'{len(folders) + 1} results folders do not rebuild from their records\n'), done.stderr


def _numbers(text):
  return set(re.findall(r'(?<![\w.])\d+\.\d+(?![\d.]*\w)', text))


def numbers_no_table_has(readme: str) -> list[str]:
  """The decimals of results/README.md's prose that no rebuilt table shows.

  Its run costs (seconds this machine measured, no records) and TFF's version are
  not results; every other decimal must be in a file a rebuild writes, so a stale or
  mistyped value in a verdict is named. (A token check: a value that happens to be
  in some other table passes.)"""
  before, _, rest = readme.partition('\n## Run cost')
  verdicts = re.sub(r'TFF \d+\.\d+', '', before + rest.partition('\n## ')[2])
  # the generated verdicts are computed from the records (experiments.claims)
  verdicts = ''.join(part.split(claims.END, 1)[-1] for part in verdicts.split(claims.BEGIN))
  shown = set()
  for folder in {r.folder for r in rebuilds.REBUILDS}:
    for table in (REPO / 'results' / folder).glob('*.md'):
      if table.name != 'README.md':
        shown |= _numbers(table.read_text())
  return sorted(_numbers(verdicts) - shown)


@pytest.mark.parametrize('where, flag, message', [
    ('elsewhere', '--tables=matrix', 'no results/ folder in {cwd}: run it from the '
     'repository root'),
    ('repo', '--tables=', '--tables is empty; name some of colr_amazon_beauty, '),
])
def test_what_would_fail_or_rebuild_everything_is_refused(tmp_path, monkeypatch, where, flag,
                                                         message):
  """Its flag parsing and main() here (a process of its own would import TF and TFF
  again); the slow test above runs its command line."""
  cwd = tmp_path if where == 'elsewhere' else REPO
  monkeypatch.chdir(cwd)
  done = launchers.run_here(rebuild_tables, flag)
  assert done.returncode == 1  # a usage error: run_here lets any other exception through
  assert message.format(cwd=cwd) in done.stderr, done.stderr[-2000:]


def test_every_number_of_the_verdicts_is_in_a_table_that_rebuilds():
  readme = (REPO / 'results' / 'README.md').read_text()
  assert numbers_no_table_has(readme) == []
  # A value before a rerun, or a typo, is named.
  assert numbers_no_table_has(readme.replace('9.78%', '9.79%')) == ['9.79']
