"""Every committed results table rebuilds byte for byte from its records."""

import os
import pathlib
import shutil
import subprocess
import sys

from launch import rebuild_tables

REPO = pathlib.Path(__file__).resolve().parents[2]


def _rebuild(*args, cwd=REPO):
  return subprocess.run(
      [sys.executable, '-m', 'launch.rebuild_tables', *args], capture_output=True, text=True,
      check=False, cwd=cwd, env={**os.environ, 'PYTHONPATH': str(REPO)})


def test_every_committed_table_rebuilds_from_its_records_alone():
  done = _rebuild()
  assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
  assert f'all {len(rebuild_tables.REBUILDS)} tables rebuild byte for byte' in done.stdout


def test_a_drifted_table_and_a_stale_file_are_named_without_any_data(tmp_path):
  # tmp_path has no ../shared/data: the rebuild reads the records alone
  shutil.copytree(REPO / 'results' / 'colr_amazon_beauty',
                  tmp_path / 'results' / 'colr_amazon_beauty')
  table = tmp_path / 'results' / 'colr_amazon_beauty' / 'table.md'
  table.write_text(table.read_text().replace('| 0.280 ± 0.001 |', '| 0.281 ± 0.001 |', 1))
  (table.parent / 'withdrawn_rows.png').write_bytes(b'a plot no rebuild writes')
  done = _rebuild('--tables=colr_amazon_beauty', cwd=tmp_path)
  assert done.returncode == 1
  assert 'colr_amazon_beauty: table.md; withdrawn_rows.png\n' in done.stdout, (
      done.stdout + done.stderr[-3000:])
