"""Downloads an official MovieLens archive into a cache directory.

  python -m launch.download --dataset=ml-100k --cache_dir=~/data
"""

from absl import app
from absl import flags

from tff_rec.data import movielens

flags.DEFINE_enum('dataset', 'ml-100k', sorted(movielens.ARCHIVES), 'Archive.')
flags.DEFINE_string('cache_dir', None, 'Where to extract it.', required=True)


def main(argv):
  del argv
  print(movielens.download(flags.FLAGS.dataset, flags.FLAGS.cache_dir))


if __name__ == '__main__':
  app.run(main)
