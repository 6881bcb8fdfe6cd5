r"""Writes a CTR file in DIN's Amazon form from `uid item item ...` sequences.

  python -m launch.sequence_clicks --sequences=../shared/data/amazon-beauty/Beauty.txt \
      --out=beauty_clicks.csv --seed=0

Each interaction after a user's first is a click, with a sampled item the user
never had as its non-click; the last pair is the test (tff_rec.data.
sequence_clicks). The CTR task reads it with its columns declared:

  python -m launch.train --task=ctr --data_dir=beauty_clicks.csv \
      --client_column=user --feature_columns=user,item --list_columns=history \
      --test_column=test --model=din
"""

import pathlib

from absl import app
from absl import flags

from experiments import clicks
from launch import common
from tff_rec.data import tables

# Needed (common.require), not absl-required.
flags.DEFINE_string('sequences', None, 'The sequence file: one `uid item item ...` line per '
                    'user, items in time order (needed).')
flags.DEFINE_string('out', None, 'The CTR file to write (.csv) (needed).')
FLAGS = flags.FLAGS  # --history_length and --seed: the CTR task's settings (launch.common)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  common.require('sequences', 'out')
  out = pathlib.Path(FLAGS.out)
  if out.exists():
    raise app.UsageError(f'--out={out} exists; remove it or name another file')
  FLAGS.task = 'ctr'
  FLAGS.model = FLAGS.model or 'din'  # the file is DIN's form, its history DIN's
  config = common.task_config()
  try:
    clicks.clicks_file(FLAGS.sequences, out, seed=config.seed,
                       history_length=config.history_length)
  except (OSError, tables.DataFormatError) as e:
    writing = isinstance(e, OSError) and e.filename is not None and (
        pathlib.Path(e.filename) in (out, *out.parents))
    flag = f'--out={out}' if writing else f'--sequences={FLAGS.sequences}'
    raise app.UsageError(f'{flag}: {e}') from None
  rows = sum(1 for _ in out.open()) - 1
  print(f'wrote {out}: {rows} rows (half clicks), each user\'s last pair marked test',
        flush=True)


if __name__ == '__main__':
  common.run(main)
