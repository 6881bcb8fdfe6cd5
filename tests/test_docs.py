"""The docs pages' examples, run as written: docs/studies.md's quick study of the
bundled MovieLens-100K clicks (its outputs rebuilt from the records, a cell held
against the trainer alone), and its file shown as it is."""

import json
import re
import shlex
import subprocess

import pandas as pd
import pytest

from launch import study
from tests import conftest
from tests.launch import launchers
from tests.launch import trainer

DOCS = conftest.REPO / 'docs'


def _blocks(page: str, language: str) -> list[str]:
  return re.findall(rf'```{language}\n(.*?)```', (DOCS / page).read_text(), re.S)


def _run_here(block: str, output_dir) -> subprocess.CompletedProcess:
  """A bash block's launch.study command, its --output_dir moved to `output_dir`."""
  args = shlex.split(block.replace('\\\n', ' '))
  assert args[:3] == ['.venv/bin/python', '-m', 'launch.study'], args
  done = launchers.run_here(study, *(f'--output_dir={output_dir}' if a.startswith(
      '--output_dir=') else a for a in args[3:]))
  assert done.returncode == 0, done.stderr[-3000:]
  return done


def test_the_study_files_excerpt_is_the_file():
  excerpt, = _blocks('studies.md', 'toml')
  text = (DOCS / 'studies' / 'ml100k_ctr.toml').read_text()
  for line in excerpt.splitlines():
    setting = line.split('#')[0].strip()
    assert setting in text, setting


@pytest.mark.slow(seconds=60)
def test_the_quick_study_runs_and_rebuilds_from_its_records_as_a_lone_trainer_would(
    real_ml100k, tmp_path, monkeypatch):
  """The page's quick study (one seed): its grids, choices and floors; then its
  outputs from the records alone, byte for byte; and a cell run in a study's worker
  (beside another) gives the curve the trainer gives alone (its main(), outside any
  study), on its flags.
  (Seeds added under a folder: tests/experiments/test_study.py.)"""
  del real_ml100k  # the study file reads it where the repository's data lives
  full, quick, rebuild = _blocks('studies.md', 'bash')
  assert '--set' not in full
  out = tmp_path / 'quick'
  # the page's commands, each its flag parsing and main() in this process, from the
  # root its paths are relative to (a process of its own would import TF and TFF
  # again; tests/launch/test_study.py runs the command line's own)
  monkeypatch.chdir(conftest.REPO)
  done = _run_here(quick, out)
  assert done.stdout.count(' done] ') == 6  # 3 methods x 2 rates, seed 0's runs at the choice
  table = (out / 'table.md').read_text()
  for row in ('| click_rate (floor) |  | 0.738 |', '| constant (floor) |  | 0.500',
              '| fedavg | client_learning_rate=', '| fedprox | client_learning_rate=',
              '| fedsubavg | client_learning_rate='):
    assert row in table, table
  assert 'eval/validation_auc' in table and 'eval/test_auc' not in table.split('## Grids')[1]
  written = {f: (out / f).read_bytes() for f in ('table.md', 'results.json')}
  _run_here(rebuild, out)
  assert {f: (out / f).read_bytes() for f in written} == written
  cell = out / 'cells' / f'fedsubavg-client_learning_rate={_chosen(out, "fedsubavg")}-s0'
  config = json.loads((cell / 'config.json').read_text())
  alone = tmp_path / 'alone'
  # the trainer's main() here, not in a study's worker (tests/launch/test_study.py
  # runs the study's own), from where the study ran, which its data_dir is relative
  # to (Bazel runs tests elsewhere)
  done = trainer.train_here(
      '--task=ctr', '--algorithm=fedsubavg', '--max_correction=50', '--model=lr',
      '--validation_fraction=0.1', '--seed=0', f'--data_dir={config["data_dir"]}',
      '--rounds=2', '--eval_every=1', '--checkpoint_every=1',
      f'--client_learning_rate={config["client_optimizer"]["learning_rate"]}',
      f'--output_dir={alone}')
  assert done.returncode == 0, done.stderr[-3000:]
  alone_config = json.loads((alone / 'config.json').read_text())
  assert {**alone_config, 'runtime': config['runtime']} == config
  assert _curve(alone / 'metrics.csv') == _curve(cell / 'metrics.csv')


def _chosen(out, method: str) -> str:
  numbers = json.loads((out / 'results.json').read_text())
  return f'{numbers["methods"][method]["chosen"]["client_learning_rate"]:g}'


def _curve(path) -> list[str]:
  """metrics.csv's columns a run computes (not its time and memory)."""
  frame = pd.read_csv(path)
  kept = [c for c in frame if c.startswith(('eval/', 'train/client_work'))]
  return frame[kept].to_csv(index=False).splitlines()


def test_the_readme_fits_a_screenful_and_every_link_of_the_docs_resolves():
  """README.md is the entry (at most 250 lines: issue 81); the topic pages live in docs/,
  and each relative link of the README and the pages names a file that exists."""
  readme = conftest.REPO / 'README.md'
  assert len(readme.read_text().splitlines()) <= 250
  pages = [readme, *sorted(DOCS.glob('*.md'))]
  for page in pages:
    for target in re.findall(r'\]\(([^)#\s]+)\)', page.read_text()):
      if not target.startswith(('http://', 'https://')):
        assert (page.parent / target).exists(), f'{page.name}: {target}'
  linked = set(re.findall(r'\]\(docs/([^)]+\.md)\)', readme.read_text()))
  assert linked == {p.name for p in DOCS.glob('*.md')}  # every page is on the map
