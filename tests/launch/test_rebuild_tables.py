"""Every committed results table rebuilds byte for byte from its records."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from launch import rebuild_tables

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_committed_table_rebuilds_from_its_records_alone(tmp_path):
  """The committed results, copied where no ../shared/data is: the rebuild reads
  the records alone. A file no rebuild writes, planted in every folder, is named
  in each (so each was rebuilt and compared), and one drifted table is named
  beside it; nothing else differs."""
  results = tmp_path / 'results'
  shutil.copytree(REPO / 'results', results)
  folders = list(dict.fromkeys(r.folder for r in rebuild_tables.REBUILDS))
  for folder in folders:
    (results / folder / 'stale.png').write_bytes(b'a plot no rebuild writes')
  table = results / 'colr_amazon_beauty' / 'table.md'
  table.write_text(table.read_text().replace('| 0.280 ± 0.001 |', '| 0.281 ± 0.001 |', 1))
  done = subprocess.run(
      [sys.executable, '-m', 'launch.rebuild_tables'], capture_output=True, text=True,
      check=False, cwd=tmp_path, env={**os.environ, 'PYTHONPATH': str(REPO)})
  assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
  expected = [f'{f}: stale.png' + ('; table.md' if f == 'colr_amazon_beauty' else '')
              for f in folders]
  assert done.stdout.splitlines() == expected, done.stdout[-4000:] + done.stderr[-4000:]
  assert done.stderr.endswith(
      f'{len(folders)} results folders do not rebuild from their records\n'), done.stderr
