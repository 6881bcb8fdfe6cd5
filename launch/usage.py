"""Usage errors said in one line, for every launcher (launch.worker too, which
loads no TensorFlow, so this module imports none)."""

import functools
import pathlib
import sys

from absl import app


def brief_usage_errors(main):
  """`main`, whose usage errors print their message alone: absl's usage would print
  the launcher's docstring and every flag above it, which buries the message."""

  @functools.wraps(main)
  def brief(argv):
    try:
      return main(argv)
    except app.UsageError as e:
      sys.exit(f'error: {e}\n(python -m launch.{pathlib.Path(sys.argv[0]).stem} --helpfull '
               'lists every flag)')

  return brief
