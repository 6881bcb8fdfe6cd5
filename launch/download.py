"""Downloads an official MovieLens archive into a cache directory.

  python -m launch.download --dataset=ml-100k --cache_dir=~/data
"""

import sys

from absl import app
from absl import flags

from tff_rec.data import archives
from tff_rec.data import movielens

flags.DEFINE_enum('dataset', 'ml-100k', sorted(movielens.ARCHIVES), 'Archive.')
flags.DEFINE_string('cache_dir', None, 'Where to extract it.', required=True)


def main(argv):
  del argv
  dataset, cache = flags.FLAGS.dataset, flags.FLAGS.cache_dir
  try:
    print(movielens.download(dataset, cache))
  except (OSError, archives.ChecksumError) as e:  # URLError is an OSError
    sys.exit(f'error: --dataset={dataset} --cache_dir={cache}: {e}. Without a network, '
             f'download {movielens.ARCHIVES[dataset].url} elsewhere and extract it into '
             f'{cache}')


if __name__ == '__main__':
  app.run(main)
