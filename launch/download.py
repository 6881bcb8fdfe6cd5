"""Downloads an official MovieLens archive into a cache directory.

  python -m launch.download --dataset=ml-100k --cache_dir=$HOME/data
"""

import pathlib
import sys
import urllib.error

from absl import app
from absl import flags

from tff_rec.data import archives
from tff_rec.data import movielens

flags.DEFINE_enum('dataset', 'ml-100k', sorted(movielens.ARCHIVES), 'Archive.')
flags.DEFINE_string('cache_dir', None, 'Where to extract it.', required=True)


def main(argv):
  del argv
  dataset = flags.FLAGS.dataset
  cache = pathlib.Path(flags.FLAGS.cache_dir).expanduser()  # '~' after '=': bash leaves it
  try:
    print(movielens.download(dataset, cache))
  except (urllib.error.URLError, archives.ChecksumError) as e:
    sys.exit(f'error: --dataset={dataset} --cache_dir={cache}: {e}. Without a network, '
             f'download {movielens.ARCHIVES[dataset].url} elsewhere and extract it into '
             f'{cache}')
  except OSError as e:  # the cache folder, not the network
    sys.exit(f'error: --cache_dir={cache}: {e.strerror}: {e.filename}; name a folder '
             'that can be created and written')


if __name__ == '__main__':
  app.run(main)
