"""tff_rec: federated recommendation on TensorFlow Federated."""

import atexit
import sys


@atexit.register
def _drop_tff_context_at_exit():
  """TFF makes an execution context when it is imported; alive at the interpreter's
  exit, its __del__ prints an error ("Exception ignored ... 'Popen'"). A program
  that imports tff_rec and runs no runtime (a script of the Python API) exits
  quietly: the context is dropped before the interpreter tears its modules down.
  (TF and TFF are not imported here: launch.worker starts without them.)"""
  if 'tensorflow_federated' in sys.modules:
    from tff_rec.runtime import native  # pylint: disable=g-import-not-at-top
    native.drop_tff_default_context()
